//! How long each object store takes to answer, by origin (scheme, host and port; an S3
//! bucket): the time to first byte a read's fetch stage sizes its window of requests in
//! flight from.
//!
//! Why: a link with 80 ms to the first byte needs ~128 requests in flight to keep the
//! decoders busy, but a store next door answers in a millisecond, and there 128 requests at
//! once only contend with the decoders for the CPU and park bodies nobody decodes yet
//! (a whole read from a server on the same machine ran 8–15% faster with 16 than with 128).
//! The store traits hand up bytes, not timings, so [`RemoteStore`](super::RemoteStore) times
//! its own requests, from sending one to its answer's headers: opening an array reads its
//! metadata, so the first read of a store already has a sample, and every chunk request
//! adds one. Metadata and data answers are kept apart, and once a chunk has answered the
//! metadata no longer counts: a CDN in front of a bucket answers its cached `zarr.json` in
//! a few milliseconds while every chunk still takes the bucket's 80, and a window sized
//! from the metadata kept the near-store floor of 16 requests in flight where the chunks
//! need 128 (for every read whose open refreshed that fast answer: 0.20 GB/s against 0.72).
//!
//! The estimate is the least answer time of the last [`HORIZON`]: queueing (at the server,
//! or for the CPU) only adds time, so the least is the closest to the link's own latency,
//! and only recent answers count, so a store that got slower is seen as such within
//! seconds.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How far back the least answer time is taken from. Long enough that a whole read, whose
/// own requests queue behind each other and behind the decoders for the CPU (on two cores
/// with the server beside them, every one of a read's last 16 answers took 160 ms from a
/// store 20 ms away), does not count its queueing as latency; short enough that a store
/// that got slower is seen as such within seconds.
const HORIZON: Duration = Duration::from_secs(10);

/// Answers kept per origin, at most (the least of the ones dropped is lost: the estimate
/// can only grow, which keeps more requests in flight, never fewer).
const MAX_SAMPLES: usize = 1024;

/// Origins kept (a process that reads from more forgets the oldest one's samples).
const MAX_ORIGINS: usize = 256;

/// The answer times of every origin this process read from.
static LATENCIES: Mutex<Latencies> = Mutex::new(Latencies::new());

/// Answer times by origin, oldest origin first.
struct Latencies {
    origins: Vec<(String, Answers)>,
}

/// What a timed request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AnswerKind {
    /// An array's or group's metadata document (`zarr.json`, `.zarray`, ...).
    Metadata,
    /// Anything else: chunks, shards and their indexes.
    Data,
}

impl AnswerKind {
    /// The kind of a request for `key` (a store key, `/`-separated), by its last segment.
    pub(crate) fn of_key(key: &str) -> Self {
        if super::is_metadata_key(key) {
            AnswerKind::Metadata
        } else {
            AnswerKind::Data
        }
    }
}

/// One origin's answers, metadata and data apart.
#[derive(Default)]
struct Answers {
    metadata: Window,
    data: Window,
}

impl Answers {
    /// The data's least answer when any chunk has answered, else the metadata's.
    fn least(&mut self, now: Instant) -> Option<Duration> {
        self.data.least(now).or_else(|| self.metadata.least(now))
    }
}

/// One origin's answers within [`HORIZON`], as a sliding-window minimum: only those that
/// no later, faster answer makes irrelevant, oldest first and slowest last, so the first is
/// the least. The newest answer stays when the horizon has passed it (then it is the best
/// knowledge there is).
#[derive(Default)]
struct Window {
    answers: VecDeque<(Instant, Duration)>,
}

impl Window {
    fn observe(&mut self, at: Instant, took: Duration) {
        while self.answers.back().is_some_and(|&(_, t)| t >= took) {
            self.answers.pop_back();
        }
        self.answers.push_back((at, took));
        if self.answers.len() > MAX_SAMPLES {
            self.answers.pop_front();
        }
    }

    fn least(&mut self, now: Instant) -> Option<Duration> {
        while self.answers.len() > 1
            && self
                .answers
                .front()
                .is_some_and(|&(at, _)| now.saturating_duration_since(at) > HORIZON)
        {
            self.answers.pop_front();
        }
        self.answers.front().map(|&(_, t)| t)
    }
}

impl Latencies {
    const fn new() -> Self {
        Latencies {
            origins: Vec::new(),
        }
    }

    fn observe(&mut self, origin: &str, kind: AnswerKind, at: Instant, took: Duration) {
        let i = match self.origins.iter().position(|(o, _)| o == origin) {
            Some(i) => i,
            None => {
                if self.origins.len() >= MAX_ORIGINS {
                    self.origins.remove(0);
                }
                self.origins.push((origin.to_string(), Answers::default()));
                self.origins.len() - 1
            }
        };
        let answers = &mut self.origins[i].1;
        match kind {
            AnswerKind::Metadata => answers.metadata.observe(at, took),
            AnswerKind::Data => answers.data.observe(at, took),
        }
    }

    fn estimate(&mut self, origin: &str, now: Instant) -> Option<Duration> {
        self.origins
            .iter_mut()
            .find(|(o, _)| o == origin)
            .and_then(|(_, answers)| answers.least(now))
    }
}

/// The origin of an object-store URL: its scheme and authority (`http://127.0.0.1:8080`,
/// `s3://bucket`), lower-cased; `None` for text that is not a URL with a host.
pub(crate) fn origin_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str().filter(|h| !h.is_empty())?;
    let origin = match parsed.port() {
        Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
        None => format!("{}://{host}", parsed.scheme()),
    };
    Some(origin.to_ascii_lowercase())
}

/// Records that `origin` answered a request of `kind` `took` after it was sent (its headers).
pub(crate) fn observe(origin: &str, kind: AnswerKind, took: Duration) {
    lock().observe(origin, kind, Instant::now(), took);
}

/// The time `origin` (see [`origin_of`]) takes to answer: the least of its data answers in
/// the last [`HORIZON`] (the newest, when all are older), or before the first data answer
/// its metadata's; `None` before any.
pub(crate) fn latency_of_origin(origin: &str) -> Option<Duration> {
    lock().estimate(origin, Instant::now())
}

/// How long the object store at `url` takes to answer, as this process measured it: the
/// least time from sending one of its origin's chunk requests to the answer's headers in
/// the last 10 seconds (the newest, when all are older; its metadata requests' before any
/// chunk was read; `None` before zarrbuf sent it any, or for a location that is not a URL
/// with a host). Reads with the default `io_concurrency` keep fewer requests in flight than
/// the default the nearer the store is than 80 ms (the default × √(this ÷ 80 ms)).
///
/// ```
/// assert_eq!(zarrbuf::store::time_to_first_byte("http://127.0.0.1:9/never-asked"), None);
/// assert_eq!(zarrbuf::store::time_to_first_byte("/a/local/dir"), None);
/// ```
pub fn time_to_first_byte(url: &str) -> Option<Duration> {
    latency_of_origin(&origin_of(url)?)
}

fn lock() -> std::sync::MutexGuard<'static, Latencies> {
    LATENCIES.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_keep_scheme_host_and_port_only() {
        assert_eq!(
            origin_of("http://127.0.0.1:8080/data/a.zarr").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            origin_of("s3://Bucket/prefix/a.zarr").as_deref(),
            Some("s3://bucket")
        );
        assert_eq!(
            origin_of("https://example.invalid/a").as_deref(),
            Some("https://example.invalid")
        );
        assert_eq!(origin_of("/data/a.zarr"), None);
        assert_eq!(origin_of("memory://"), None);
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_estimate_is_the_least_answer_within_the_horizon() {
        let mut book = Latencies::new();
        let t0 = Instant::now();
        let origin = "http://a:1";
        assert_eq!(book.estimate(origin, t0), None);
        for (i, took) in [30, 5, 40, 160, 120].into_iter().enumerate() {
            book.observe(origin, AnswerKind::Data, t0 + ms(i as u64), ms(took));
        }
        // Queued answers after a fast one do not count while it is within the horizon.
        assert_eq!(book.estimate(origin, t0 + ms(10)), Some(ms(5)));
        assert_eq!(book.estimate("http://b:1", t0), None);
        // Past it, the least of the later ones.
        assert_eq!(book.estimate(origin, t0 + HORIZON + ms(2)), Some(ms(40)));
        assert_eq!(book.estimate(origin, t0 + HORIZON + ms(4)), Some(ms(120)));
        // When every answer is older than the horizon, the newest stands.
        assert_eq!(book.estimate(origin, t0 + HORIZON * 5), Some(ms(120)));
        // A faster answer takes over at once.
        book.observe(origin, AnswerKind::Data, t0 + HORIZON * 5, ms(2));
        assert_eq!(book.estimate(origin, t0 + HORIZON * 5), Some(ms(2)));
    }

    #[test]
    fn an_origin_keeps_a_bounded_number_of_answers() {
        let mut book = Latencies::new();
        let t0 = Instant::now();
        // Ever slower answers: each one could be the least once the earlier ones expire.
        for i in 0..(MAX_SAMPLES as u64 + 100) {
            book.observe("http://a:1", AnswerKind::Data, t0, ms(i + 1));
        }
        assert_eq!(book.origins[0].1.data.answers.len(), MAX_SAMPLES);
        // The fastest were dropped: the estimate grew (more requests, never fewer).
        assert_eq!(book.estimate("http://a:1", t0), Some(ms(101)));
    }

    #[test]
    fn origins_past_the_limit_forget_the_oldest() {
        let mut book = Latencies::new();
        let t0 = Instant::now();
        book.observe("http://first:1", AnswerKind::Data, t0, ms(1));
        for i in 0..MAX_ORIGINS {
            book.observe(&format!("http://other-{i}:1"), AnswerKind::Data, t0, ms(2));
        }
        assert_eq!(book.estimate("http://first:1", t0), None);
        assert_eq!(book.origins.len(), MAX_ORIGINS);
        assert_eq!(book.estimate("http://other-0:1", t0), Some(ms(2)));
    }

    #[test]
    fn the_process_registry_answers_by_origin() {
        let origin = origin_of("HTTP://latency-registry-test:9/a/b.zarr").unwrap();
        assert_eq!(latency_of_origin(&origin), None);
        observe(&origin, AnswerKind::Data, Duration::from_millis(7));
        assert_eq!(latency_of_origin(&origin), Some(Duration::from_millis(7)));
    }

    #[test]
    fn metadata_answers_count_only_until_a_chunk_answers() {
        let mut book = Latencies::new();
        let t0 = Instant::now();
        let origin = "http://cdn:1";
        // A CDN answers the cached metadata at once ...
        book.observe(origin, AnswerKind::Metadata, t0, ms(3));
        assert_eq!(book.estimate(origin, t0), Some(ms(3)));
        // ... but the chunks come from the bucket behind it.
        book.observe(origin, AnswerKind::Data, t0 + ms(90), ms(85));
        assert_eq!(book.estimate(origin, t0 + ms(90)), Some(ms(85)));
        // A later open's fast metadata does not shrink it again.
        book.observe(origin, AnswerKind::Metadata, t0 + ms(100), ms(2));
        assert_eq!(book.estimate(origin, t0 + ms(100)), Some(ms(85)));
        book.observe(origin, AnswerKind::Data, t0 + ms(200), ms(80));
        assert_eq!(book.estimate(origin, t0 + ms(200)), Some(ms(80)));
    }

    #[test]
    fn a_requests_kind_follows_its_key() {
        assert_eq!(AnswerKind::of_key("a/b/zarr.json"), AnswerKind::Metadata);
        assert_eq!(AnswerKind::of_key("a/.zarray"), AnswerKind::Metadata);
        assert_eq!(AnswerKind::of_key("a/c/0/0"), AnswerKind::Data);
        assert_eq!(AnswerKind::of_key("a/zarr.json.bak"), AnswerKind::Data);
    }
}

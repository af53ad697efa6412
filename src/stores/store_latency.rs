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
//! adds one.
//!
//! The estimate is the least of the last [`SAMPLES`]: queueing (at the server, or for the
//! CPU) only adds time, so the least is the closest to the link's own latency, and only the
//! last few count, so a store that got slower, or whose chunks come from farther away than
//! its metadata, is soon seen as such.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Samples kept per origin.
const SAMPLES: usize = 16;

/// Origins kept (a process that reads from more forgets the oldest one's samples).
const MAX_ORIGINS: usize = 256;

/// The recent small answers of every origin this process read from.
static LATENCIES: Mutex<Latencies> = Mutex::new(Latencies::new());

/// Recent small answers by origin, oldest origin first.
struct Latencies {
    origins: Vec<(String, VecDeque<Duration>)>,
}

impl Latencies {
    const fn new() -> Self {
        Latencies {
            origins: Vec::new(),
        }
    }

    fn observe(&mut self, origin: &str, took: Duration) {
        let at = match self.origins.iter().position(|(o, _)| o == origin) {
            Some(at) => at,
            None => {
                if self.origins.len() >= MAX_ORIGINS {
                    self.origins.remove(0);
                }
                self.origins
                    .push((origin.to_string(), VecDeque::with_capacity(SAMPLES)));
                self.origins.len() - 1
            }
        };
        let samples = &mut self.origins[at].1;
        if samples.len() == SAMPLES {
            samples.pop_front();
        }
        samples.push_back(took);
    }

    fn estimate(&self, origin: &str) -> Option<Duration> {
        self.origins
            .iter()
            .find(|(o, _)| o == origin)
            .and_then(|(_, samples)| samples.iter().min().copied())
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

/// Records that `origin` answered a request's headers `took` after it was sent.
pub(crate) fn observe(origin: &str, took: Duration) {
    lock().observe(origin, took);
}

/// The time `origin` (see [`origin_of`]) takes to answer: the least of its recent samples;
/// `None` before any.
pub(crate) fn latency_of_origin(origin: &str) -> Option<Duration> {
    lock().estimate(origin)
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

    #[test]
    fn the_estimate_is_the_least_of_the_recent_samples() {
        let mut book = Latencies::new();
        let origin = "http://a:1";
        assert_eq!(book.estimate(origin), None);
        for ms in [30, 5, 40] {
            book.observe(origin, Duration::from_millis(ms));
        }
        assert_eq!(book.estimate(origin), Some(Duration::from_millis(5)));
        assert_eq!(book.estimate("http://b:1"), None);
        // A link that got slower: once the fast sample is among the oldest dropped, the
        // estimate follows.
        for _ in 0..SAMPLES {
            book.observe(origin, Duration::from_millis(80));
        }
        assert_eq!(book.estimate(origin), Some(Duration::from_millis(80)));
    }

    #[test]
    fn origins_past_the_limit_forget_the_oldest() {
        let mut book = Latencies::new();
        book.observe("http://first:1", Duration::from_millis(1));
        for i in 0..MAX_ORIGINS {
            book.observe(&format!("http://other-{i}:1"), Duration::from_millis(2));
        }
        assert_eq!(book.estimate("http://first:1"), None);
        assert_eq!(book.origins.len(), MAX_ORIGINS);
        assert_eq!(
            book.estimate("http://other-0:1"),
            Some(Duration::from_millis(2))
        );
    }

    #[test]
    fn the_process_registry_answers_by_origin() {
        let origin = origin_of("HTTP://latency-registry-test:9/a/b.zarr").unwrap();
        assert_eq!(latency_of_origin(&origin), None);
        observe(&origin, Duration::from_millis(7));
        assert_eq!(latency_of_origin(&origin), Some(Duration::from_millis(7)));
    }
}

//! Encoded chunks shared between the reads of one stream while they are in flight.
//!
//! A read stream ([`crate::stream::ReadStream`]) runs several subset reads at once, and neighbouring
//! subsets (consecutive minibatches) often touch the same chunks. Each read *claims* the
//! units it will fetch when it is admitted, before it starts; the first read to fetch a
//! claimed unit leads the request, reads that want the same unit meanwhile wait for it, and
//! the bytes are kept (as encoded bytes, shared by reference) only while another admitted
//! read still has the unit claimed. When the last claim on a unit is taken or released (its
//! read finished, failed or was cancelled) the bytes are dropped, so the memory held is at
//! most the encoded units of the reads in flight.
//!
//! A leader whose fetch fails (or is cancelled) publishes nothing: its waiters fetch the unit
//! themselves, so every read reports its own error.

use crate::errors::Result;
use bytes::Bytes;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A unit's key: its chunk (or inner chunk) indices.
type Key = Vec<u64>;

/// A fetch in flight, which waiters block on until its leader finishes or gives up.
struct Flight {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Flight {
    fn wait(&self) {
        let mut done = lock(&self.done);
        while !*done {
            done = self.cv.wait(done).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn finish(&self) {
        *lock(&self.done) = true;
        self.cv.notify_all();
    }
}

enum State {
    /// Nobody is fetching it and nothing is kept.
    Idle,
    /// A read is fetching it.
    InFlight(Arc<Flight>),
    /// Fetched, kept for the claims still open (`None`: the chunk is not stored).
    Ready(Option<Bytes>),
}

struct Entry {
    /// Open claims: admitted reads that will fetch this unit and have not yet.
    claims: usize,
    state: State,
}

/// The per-stream table of shared units.
#[derive(Default)]
pub(crate) struct ChunkShare {
    entries: Mutex<HashMap<Key, Entry>>,
}

impl ChunkShare {
    /// Claims `keys` for one read about to be admitted.
    pub(crate) fn claim(self: &Arc<Self>, keys: Vec<Key>) -> Claim {
        let untaken: HashSet<Key> = keys.into_iter().collect();
        {
            let mut entries = lock(&self.entries);
            for k in &untaken {
                entries
                    .entry(k.clone())
                    .or_insert(Entry {
                        claims: 0,
                        state: State::Idle,
                    })
                    .claims += 1;
            }
        }
        Claim {
            share: self.clone(),
            untaken: Mutex::new(untaken),
        }
    }

    /// Units currently kept (fetched and still claimed by a read in flight).
    pub(crate) fn kept(&self) -> usize {
        lock(&self.entries)
            .values()
            .filter(|e| matches!(e.state, State::Ready(_)))
            .count()
    }

    fn release(&self, key: &[u64]) {
        let mut entries = lock(&self.entries);
        if let Some(e) = entries.get_mut(key) {
            e.claims = e.claims.saturating_sub(1);
            if e.claims == 0 && !matches!(e.state, State::InFlight(_)) {
                entries.remove(key);
            }
        }
    }

    /// The unit's bytes: kept ones, or those of the read fetching it (waited for), or
    /// fetched here with `fetch` (and kept when another claim is open).
    fn get(
        &self,
        key: &[u64],
        fetch: &mut dyn FnMut() -> Result<Option<Bytes>>,
    ) -> Result<Option<Bytes>> {
        loop {
            let mut entries = lock(&self.entries);
            let Some(entry) = entries.get_mut(key) else {
                drop(entries);
                return fetch();
            };
            match &entry.state {
                State::Ready(bytes) => return Ok(bytes.clone()),
                State::InFlight(flight) => {
                    let flight = flight.clone();
                    drop(entries);
                    // Then it is Ready, or Idle again (the leader failed): look again.
                    flight.wait();
                }
                State::Idle => {
                    let flight = Arc::new(Flight {
                        done: Mutex::new(false),
                        cv: Condvar::new(),
                    });
                    entry.state = State::InFlight(flight.clone());
                    drop(entries);
                    let lead = Lead {
                        share: self,
                        key,
                        flight,
                    };
                    let got = fetch()?;
                    lead.publish(&got);
                    return Ok(got);
                }
            }
        }
    }
}

/// The read fetching a unit for everyone. Dropped without publishing (the fetch failed, was
/// cancelled or panicked), it leaves the unit idle and wakes the waiters to fetch it.
struct Lead<'a> {
    share: &'a ChunkShare,
    key: &'a [u64],
    flight: Arc<Flight>,
}

impl Lead<'_> {
    fn publish(self, got: &Option<Bytes>) {
        let mut entries = lock(&self.share.entries);
        if let Some(e) = entries.get_mut(self.key) {
            // The leader's own claim is still open: keep the bytes only for other claims.
            e.state = if e.claims > 1 {
                State::Ready(got.as_ref().map(|v| Bytes::copy_from_slice(v)))
            } else {
                State::Idle
            };
        }
        // `self` drops here, waking the waiters (with the table unlocked first).
        drop(entries);
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        {
            let mut entries = lock(&self.share.entries);
            if let Some(e) = entries.get_mut(self.key)
                && matches!(e.state, State::InFlight(_))
            {
                e.state = State::Idle;
            }
        }
        self.flight.finish();
    }
}

/// One read's claims on the units it will fetch; dropping it releases those not taken.
pub(crate) struct Claim {
    share: Arc<ChunkShare>,
    untaken: Mutex<HashSet<Key>>,
}

impl Claim {
    /// The unit's bytes, shared with the other reads of the stream where they claimed it
    /// too; `fetch` runs when no kept or in-flight copy exists.
    pub(crate) fn get(
        &self,
        key: &[u64],
        mut fetch: impl FnMut() -> Result<Option<Bytes>>,
    ) -> Result<Option<Bytes>> {
        if !lock(&self.untaken).remove(key) {
            // Not claimed (or taken already): nothing to share.
            return fetch();
        }
        let got = self.share.get(key, &mut fetch);
        self.share.release(key);
        got
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let untaken = std::mem::take(&mut *lock(&self.untaken));
        for k in &untaken {
            self.share.release(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_unit_claimed_twice_is_fetched_once_and_dropped_after_both_took_it() {
        let share = Arc::new(ChunkShare::default());
        let fetches = AtomicUsize::new(0);
        let fetch = || {
            fetches.fetch_add(1, Ordering::SeqCst);
            Ok(Some(Bytes::from(vec![7u8; 3])))
        };
        let a = share.claim(vec![vec![0, 1]]);
        let b = share.claim(vec![vec![0, 1], vec![0, 2]]);
        assert_eq!(
            a.get(&[0, 1], fetch).unwrap(),
            Some(Bytes::from(vec![7u8; 3]))
        );
        assert_eq!(share.kept(), 1, "kept for b's open claim");
        assert_eq!(
            b.get(&[0, 1], fetch).unwrap(),
            Some(Bytes::from(vec![7u8; 3]))
        );
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        assert_eq!(share.kept(), 0, "dropped once the last claim took it");
        drop(b);
        assert!(
            lock(&share.entries).is_empty(),
            "b's untaken claim released"
        );
    }

    #[test]
    fn a_failed_leader_leaves_the_unit_to_the_next_reader() {
        let share = Arc::new(ChunkShare::default());
        let a = share.claim(vec![vec![3]]);
        let b = share.claim(vec![vec![3]]);
        let err = a.get(&[3], || Err(crate::Error::Cancelled("test".into())));
        assert!(err.is_err());
        assert_eq!(share.kept(), 0);
        assert_eq!(b.get(&[3], || Ok(None)).unwrap(), None);
        assert!(lock(&share.entries).is_empty());
    }

    #[test]
    fn a_waiter_gets_the_leaders_bytes() {
        let share = Arc::new(ChunkShare::default());
        let a = share.claim(vec![vec![1]]);
        let b = share.claim(vec![vec![1]]);
        let fetches = AtomicUsize::new(0);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let (a, fetches) = (&a, &fetches);
            s.spawn(move || {
                a.get(&[1], || {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    started_tx.send(()).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Ok(Some(Bytes::from(vec![1, 2])))
                })
                .unwrap()
            });
            // a leads the fetch by now; b waits for it instead of fetching.
            started_rx.recv().unwrap();
            let got = b
                .get(&[1], || {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    Ok(Some(Bytes::from(vec![9])))
                })
                .unwrap();
            assert_eq!(got, Some(Bytes::from(vec![1, 2])));
        });
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }
}

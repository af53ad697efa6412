//! Which cached chunk goes first when the cache is full: least recently used ([`Lru`]) or
//! CLOCK ([`Clock`], a second chance for entries read since the hand last passed), behind
//! one trait so the cache and its benchmark can take either.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// The eviction order of a cache's entries. The cache tells the policy of every insertion,
/// hit and removal, and asks it for a victim when it needs room.
pub(crate) trait Policy<K>: Send {
    /// `key` was inserted (it is not in the policy yet).
    fn inserted(&mut self, key: K);
    /// `key` was read.
    fn touched(&mut self, key: &K);
    /// `key` left the cache for another reason (invalidation).
    fn removed(&mut self, key: &K);
    /// The entry to evict next, removed from the policy; `None` when it holds none.
    fn evict(&mut self) -> Option<K>;
    /// Forgets every entry.
    fn clear(&mut self);
}

/// Which policy a cache uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    /// Least recently used.
    Lru,
    /// CLOCK: entries in insertion order round a ring; the hand skips (and clears the mark
    /// of) entries read since it last passed and evicts the first unmarked one.
    Clock,
}

impl PolicyKind {
    pub(crate) fn build<K: Clone + Eq + Hash + Send + 'static>(self) -> Box<dyn Policy<K>> {
        match self {
            PolicyKind::Lru => Box::new(Lru::default()),
            PolicyKind::Clock => Box::new(Clock::default()),
        }
    }
}

/// Least recently used: each entry's last use is a tick; the smallest tick goes first.
pub(crate) struct Lru<K> {
    tick: u64,
    last_use: HashMap<K, u64>,
    by_tick: BTreeMap<u64, K>,
}

impl<K> Default for Lru<K> {
    fn default() -> Self {
        Lru {
            tick: 0,
            last_use: HashMap::new(),
            by_tick: BTreeMap::new(),
        }
    }
}

impl<K: Clone + Eq + Hash + Send> Policy<K> for Lru<K> {
    fn inserted(&mut self, key: K) {
        self.tick += 1;
        self.by_tick.insert(self.tick, key.clone());
        if let Some(old) = self.last_use.insert(key, self.tick) {
            self.by_tick.remove(&old);
        }
    }

    fn touched(&mut self, key: &K) {
        self.tick += 1;
        if let Some(t) = self.last_use.get_mut(key) {
            if let Some(k) = self.by_tick.remove(t) {
                self.by_tick.insert(self.tick, k);
            }
            *t = self.tick;
        }
    }

    fn removed(&mut self, key: &K) {
        if let Some(t) = self.last_use.remove(key) {
            self.by_tick.remove(&t);
        }
    }

    fn evict(&mut self) -> Option<K> {
        let (_, key) = self.by_tick.pop_first()?;
        self.last_use.remove(&key);
        Some(key)
    }

    fn clear(&mut self) {
        self.last_use.clear();
        self.by_tick.clear();
    }
}

/// CLOCK: a ring of entries with a "read since the hand passed" mark each.
pub(crate) struct Clock<K> {
    ring: Vec<(K, bool)>,
    slot: HashMap<K, usize>,
    hand: usize,
}

impl<K> Default for Clock<K> {
    fn default() -> Self {
        Clock {
            ring: Vec::new(),
            slot: HashMap::new(),
            hand: 0,
        }
    }
}

impl<K: Clone + Eq + Hash> Clock<K> {
    /// Takes the entry at `at` out of the ring (the last entry moves into its place).
    fn take(&mut self, at: usize) -> K {
        let (key, _) = self.ring.swap_remove(at);
        self.slot.remove(&key);
        if let Some((moved, _)) = self.ring.get(at) {
            self.slot.insert(moved.clone(), at);
        }
        key
    }
}

impl<K: Clone + Eq + Hash + Send> Policy<K> for Clock<K> {
    fn inserted(&mut self, key: K) {
        if self.slot.contains_key(&key) {
            return;
        }
        self.slot.insert(key.clone(), self.ring.len());
        self.ring.push((key, false));
    }

    fn touched(&mut self, key: &K) {
        if let Some(&at) = self.slot.get(key) {
            self.ring[at].1 = true;
        }
    }

    fn removed(&mut self, key: &K) {
        if let Some(&at) = self.slot.get(key) {
            self.take(at);
        }
    }

    fn evict(&mut self) -> Option<K> {
        // Every mark is cleared within one turn, so this ends within two.
        loop {
            if self.ring.is_empty() {
                return None;
            }
            if self.hand >= self.ring.len() {
                self.hand = 0;
            }
            let entry = &mut self.ring[self.hand];
            if entry.1 {
                entry.1 = false;
                self.hand += 1;
            } else {
                return Some(self.take(self.hand));
            }
        }
    }

    fn clear(&mut self) {
        self.ring.clear();
        self.slot.clear();
        self.hand = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_the_least_recently_used() {
        let mut p = Lru::default();
        for k in 0..4 {
            p.inserted(k);
        }
        p.touched(&0);
        p.removed(&2);
        assert_eq!(p.evict(), Some(1));
        assert_eq!(p.evict(), Some(3));
        assert_eq!(p.evict(), Some(0));
        assert_eq!(p.evict(), None);
    }

    #[test]
    fn clock_gives_read_entries_a_second_chance() {
        let mut p = Clock::default();
        for k in 0..4 {
            p.inserted(k);
        }
        p.touched(&0);
        p.touched(&1);
        assert_eq!(p.evict(), Some(2));
        p.removed(&3);
        // 0 and 1 lose their marks on this turn; then the first unmarked goes.
        let next = p.evict();
        assert!(next == Some(0) || next == Some(1), "{next:?}");
        assert_eq!(p.ring.len(), 1);
        p.clear();
        assert_eq!(p.evict(), None);
    }
}

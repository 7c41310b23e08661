//! A small open-addressing map from a line address to a `u32` (a cache way, an MSHR),
//! for lookups on every memory access: linear probing on a multiplicative hash, deletion
//! by backward shift (no tombstones), so a lookup touches one or two adjacent slots. Keys
//! are any `u64` (`u64::MAX`, the empty-slot mark, is kept aside); nothing depends on a
//! hash seed.

/// One slot: `(key, value)`, empty when the key is [`LineMap::NO_KEY`].
type Slot = (u64, u32);

#[derive(Clone, Debug)]
pub(crate) struct LineMap {
    slots: Vec<Slot>,
    /// `64 - log2(slots.len())`: the hash's top bits pick the home slot.
    shift: u32,
    len: usize,
    /// The value of key [`LineMap::NO_KEY`] (a 1-byte line at the top of memory).
    top: Option<u32>,
}

impl LineMap {
    /// The key an empty slot holds.
    pub(crate) const NO_KEY: u64 = u64::MAX;

    /// A map for up to `n` keys without growing (it grows past that).
    pub(crate) fn with_capacity(n: usize) -> LineMap {
        // At most half full: probe sequences stay short.
        let slots = (n.max(4) * 2).next_power_of_two();
        LineMap {
            slots: vec![(Self::NO_KEY, 0); slots],
            shift: 64 - slots.trailing_zeros(),
            len: 0,
            top: None,
        }
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        // Fibonacci hashing: line addresses differ in their middle bits, which the multiply
        // spreads into the top bits.
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Starts loading `key`'s home slot into the host's caches.
    #[inline]
    pub(crate) fn prefetch(&self, key: u64) {
        if let Some(slot) = self.slots.get(self.home(key)) {
            crate::prefetch(slot);
        }
    }

    /// The value of `key`.
    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<u32> {
        if key == Self::NO_KEY {
            return self.top;
        }
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let (k, v) = self.slots[i];
            if k == key {
                return Some(v);
            }
            if k == Self::NO_KEY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Inserts `key` with `value` if absent; returns `false` (and changes nothing) when
    /// `key` is already there. Forced inline, as is `remove`: a line's MSHR and, with wide
    /// sets, its L1 way are indexed here on every miss.
    #[inline(always)]
    pub(crate) fn insert(&mut self, key: u64, value: u32) -> bool {
        if key == Self::NO_KEY {
            return self.top.is_none() && self.top.replace(value).is_none();
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].0;
            if k == key {
                return false;
            }
            if k == Self::NO_KEY {
                self.slots[i] = (key, value);
                self.len += 1;
                return true;
            }
            i = (i + 1) & mask;
        }
    }

    /// Removes `key`; returns its value.
    #[inline(always)]
    pub(crate) fn remove(&mut self, key: u64) -> Option<u32> {
        if key == Self::NO_KEY {
            return self.top.take();
        }
        let mask = self.mask();
        let mut i = self.home(key);
        let v = loop {
            let (k, v) = self.slots[i];
            if k == key {
                break v;
            }
            if k == Self::NO_KEY {
                return None;
            }
            i = (i + 1) & mask;
        };
        self.len -= 1;
        // Backward shift: move later entries of the probe run into the hole when their home
        // does not lie cyclically in `(hole, j]`, so every key stays reachable from its home
        // without passing an empty slot.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].0;
            if k == Self::NO_KEY {
                break;
            }
            let h = self.home(k);
            let stays = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = (Self::NO_KEY, 0);
        Some(v)
    }

    /// Removes every key.
    pub(crate) fn clear(&mut self) {
        self.top = None;
        if self.len > 0 {
            self.slots.fill((Self::NO_KEY, 0));
            self.len = 0;
        }
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let top = self.top;
        // Twice the slots (`with_capacity` doubles its argument).
        *self = LineMap::with_capacity(old.len());
        self.top = top;
        for (k, v) in old {
            if k != Self::NO_KEY {
                self.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LineMap;
    use std::collections::HashMap;

    /// Random inserts, lookups and removals agree with a `HashMap`, through growth and
    /// with keys that collide on their home slot (multiples of a large power of two).
    #[test]
    fn agrees_with_a_hashmap() {
        for (cap, spread) in [(4usize, 128u64), (64, 128), (16, 1 << 40), (8, 1)] {
            let mut m = LineMap::with_capacity(cap);
            let mut r: HashMap<u64, u32> = HashMap::new();
            let mut x = 7u64;
            for step in 0..50_000u32 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // The empty-slot mark is a key too, now and then.
                let key = match (x >> 33) % 201 {
                    200 => LineMap::NO_KEY,
                    k => k * spread,
                };
                match (x >> 20) % 3 {
                    0 => {
                        let want = !r.contains_key(&key);
                        if want {
                            r.insert(key, step);
                        }
                        assert_eq!(m.insert(key, step), want);
                    }
                    1 => assert_eq!(m.remove(key), r.remove(&key)),
                    _ => assert_eq!(m.get(key), r.get(&key).copied()),
                }
                assert_eq!(m.len + usize::from(m.top.is_some()), r.len());
            }
            for k in 0..200 {
                assert_eq!(m.get(k * spread), r.get(&(k * spread)).copied());
            }
            m.clear();
            assert_eq!(m.get(spread), None);
        }
        let mut m = LineMap::with_capacity(4);
        assert!(m.insert(LineMap::NO_KEY, 1));
        assert!(!m.insert(LineMap::NO_KEY, 2));
        assert_eq!(m.get(LineMap::NO_KEY), Some(1));
        assert_eq!(m.remove(LineMap::NO_KEY), Some(1));
        assert_eq!(m.get(LineMap::NO_KEY), None);
    }
}

//! A per-process memo: what is costly to compute and the same each time it
//! is asked within one run (a compiled pattern, a Dockerfile's analysis),
//! computed once per key and handed out as clones.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, OnceLock};

/// Values by key, for a `static`. The computation runs outside the lock:
/// two callers that miss the same key at once both compute it, and both
/// get what they computed (equal values, for a memo's purpose). A poisoned
/// lock makes the memo forget, never fail.
pub struct Memo<K, V> {
    map: OnceLock<Mutex<HashMap<K, V>>>,
}

impl<K, V> Memo<K, V> {
    pub const fn new() -> Self {
        Self {
            map: OnceLock::new(),
        }
    }
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash, V: Clone> Memo<K, V> {
    fn map(&self) -> &Mutex<HashMap<K, V>> {
        self.map.get_or_init(Default::default)
    }

    /// The value kept for `key`, if one is.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map().lock().ok()?.get(key).cloned()
    }

    /// Keeps `value` for `key`, replacing what was kept.
    pub fn insert(&self, key: K, value: V) {
        if let Ok(mut m) = self.map().lock() {
            m.insert(key, value);
        }
    }

    /// Forgets what is kept for `key`.
    pub fn remove<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Ok(mut m) = self.map().lock() {
            m.remove(key);
        }
    }

    /// The value for `key`: kept, or computed by `f` and kept.
    pub fn get_or_insert_with<Q>(&self, key: &Q, f: impl FnOnce() -> V) -> V
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(v) = self.get(key) {
            return v;
        }
        let v = f();
        self.insert(key.to_owned(), v.clone());
        v
    }

    /// [`get_or_insert_with`](Self::get_or_insert_with) for a computation
    /// that may fail: an error is returned and not kept.
    pub fn get_or_try_insert_with<Q, E>(
        &self,
        key: &Q,
        f: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(v) = self.get(key) {
            return Ok(v);
        }
        let v = f()?;
        self.insert(key.to_owned(), v.clone());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_value_is_computed_once_per_key_and_an_error_is_not_kept() {
        static M: Memo<String, usize> = Memo::new();
        let calls = Cell::new(0);
        let count = |n: usize| {
            calls.set(calls.get() + 1);
            n
        };
        assert_eq!(M.get_or_insert_with("a", || count(1)), 1);
        assert_eq!(M.get_or_insert_with("a", || count(2)), 1);
        assert_eq!(M.get_or_insert_with("b", || count(3)), 3);
        assert_eq!(calls.get(), 2);
        let failed: Result<usize, &str> = M.get_or_try_insert_with("c", || Err("no"));
        assert_eq!(failed, Err("no"));
        assert_eq!(M.get("c"), None);
        assert_eq!(M.get_or_try_insert_with::<_, &str>("c", || Ok(4)), Ok(4));
        assert_eq!(M.get_or_try_insert_with::<_, &str>("c", || Ok(5)), Ok(4));
        M.remove("c");
        assert_eq!(M.get("c"), None);
    }
}

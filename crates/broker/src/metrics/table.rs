//! A bounded map from label set to shared counters: the storage behind every metric family whose
//! label values come from clients (topics, groups, request codes). Reads take a shared lock; a
//! label set is added under the write lock only while the table has room, so a client inventing
//! names or codes cannot grow it without limit.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::RwLock;

/// Label set → counters, at most `max_entries` of them.
pub(crate) struct BoundedTable<K, V> {
    entries: RwLock<HashMap<K, Arc<V>>>,
    max_entries: usize,
}

impl<K, V> std::fmt::Debug for BoundedTable<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedTable")
            .field("entries", &self.entries.read().len())
            .field("max_entries", &self.max_entries)
            .finish()
    }
}

impl<K: Hash + Eq + Clone, V: Default> BoundedTable<K, V> {
    /// An empty table that keeps at most `max_entries` label sets.
    pub(crate) fn new(max_entries: usize) -> Self {
        BoundedTable {
            entries: RwLock::new(HashMap::new()),
            max_entries,
        }
    }

    /// The counters of `key`, created if the table has room; `None` when it is full.
    pub(crate) fn get_or_insert(&self, key: &K) -> Option<Arc<V>> {
        if let Some(v) = self.entries.read().get(key) {
            return Some(Arc::clone(v));
        }
        let mut entries = self.entries.write();
        if let Some(v) = entries.get(key) {
            return Some(Arc::clone(v));
        }
        if entries.len() >= self.max_entries {
            return None;
        }
        let v = Arc::new(V::default());
        entries.insert(key.clone(), Arc::clone(&v));
        Some(v)
    }

    /// Every label set and its counters.
    pub(crate) fn snapshot(&self) -> Vec<(K, Arc<V>)> {
        self.entries
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn a_full_table_refuses_new_keys_and_keeps_counting_old_ones() {
        let table: BoundedTable<u32, AtomicU64> = BoundedTable::new(2);
        for key in [1, 2] {
            let c = table.get_or_insert(&key).expect("room");
            c.fetch_add(1, Ordering::Relaxed);
        }
        assert!(table.get_or_insert(&3).is_none());
        let again = table.get_or_insert(&1).expect("known key");
        assert_eq!(again.fetch_add(1, Ordering::Relaxed), 1);
        let mut rows: Vec<u32> = table.snapshot().into_iter().map(|(k, _)| k).collect();
        rows.sort_unstable();
        assert_eq!(rows, [1, 2]);
    }
}

//! One parallel map for the runtime and its users (forking N sandboxes,
//! loading memory pages, `arbor fanout`, `arbor task validate`): items are
//! handed out one at a time to at most `workers` scoped threads, results come
//! back in item order, and a worker that panics loses only the item it was
//! running (reported as [`Panicked`]); the other workers carry on with the
//! rest.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The item's worker thread panicked while running it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the worker thread running this item panicked")]
pub struct Panicked;

/// Worker threads for `items` items: one per core, never more than items,
/// at least one.
pub fn default_workers(items: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items)
        .max(1)
}

/// `f(i, &items[i])` for every item on at most `workers` threads; results
/// in item order.
pub fn map<T, R, F>(items: &[T], workers: usize, f: F) -> Vec<Result<R, Panicked>>
where
    T: Sync,
    R: Send,
    F: Fn(usize, &T) -> R + Sync,
{
    let workers = workers.clamp(1, items.len().max(1));
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        let r = f(i, item);
                        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    }
                })
            })
            .collect();
        // Joined here, so a worker's panic is not re-raised by the scope: the
        // slot it left empty reports it.
        for h in handles {
            let _ = h.join();
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .ok_or(Panicked)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    use super::*;

    #[test]
    fn results_come_back_in_item_order() {
        let items: Vec<u64> = (0..100).collect();
        let out = map(&items, 4, |i, x| {
            assert_eq!(i as u64, *x);
            x * x
        });
        let got: Vec<u64> = out.into_iter().map(Result::unwrap).collect();
        assert_eq!(got, items.iter().map(|x| x * x).collect::<Vec<_>>());
        assert!(map(&[] as &[u8], 3, |_, x| *x).is_empty());
    }

    /// Two items meet only if two workers run them at the same time: each
    /// waits (at most `patience`) for the other to arrive.
    fn rendezvous(workers: usize, patience: Duration) -> Vec<bool> {
        let arrived = Mutex::new(0usize);
        let cv = Condvar::new();
        let items = [0, 1];
        map(&items, workers, |_, _| {
            let mut n = arrived.lock().unwrap();
            *n += 1;
            cv.notify_all();
            let (n, _) = cv.wait_timeout_while(n, patience, |n| *n < 2).unwrap();
            *n >= 2
        })
        .into_iter()
        .map(Result::unwrap)
        .collect()
    }

    #[test]
    fn items_run_concurrently_on_several_workers() {
        assert_eq!(rendezvous(2, Duration::from_secs(30)), [true, true]);
    }

    #[test]
    fn one_worker_runs_items_one_at_a_time() {
        // The control: with one worker the first item waits for nothing.
        assert!(!rendezvous(1, Duration::from_millis(200))[0]);
    }

    #[test]
    fn a_panic_loses_only_its_own_item() {
        let items: Vec<u32> = (0..20).collect();
        let out = map(&items, 3, |_, x| {
            assert!(*x != 7, "item seven fails");
            *x
        });
        for (i, r) in out.iter().enumerate() {
            if i == 7 {
                assert_eq!(*r, Err(Panicked));
            } else {
                assert_eq!(*r, Ok(i as u32));
            }
        }
    }
}

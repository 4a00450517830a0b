//! `write.distribution-mode=range`: partitions spread over the writer tasks by observed
//! traffic, so that no task carries much more than its share and each partition goes to as
//! few tasks as possible.
//!
//! The design follows Flink's range distribution for Iceberg sinks (statistics of the data
//! seen, aggregated at each checkpoint, drive the assignment of keys to subtasks until the
//! next one), with floe's commit as the checkpoint:
//!
//! - the bytes routed to each partition during a commit window are the window's statistics;
//!   at each commit they are added to the running statistics, which are halved first, so
//!   recent traffic weighs most and a partition that goes quiet fades out;
//! - the next window's assignment is computed from those statistics ([`assign`]): partitions
//!   by weight, heaviest first, each to the least loaded task; a partition heavier than a
//!   task's share (total / tasks) is split over `ceil(weight / share)` tasks, and its rows go
//!   to whichever of its tasks has received the least of it in this window;
//! - a partition the statistics do not know yet goes to the task that has received the least
//!   in this window, and stays there until the commit;
//! - before the first statistics (the first commit window of a run) rows go round robin by
//!   micro-batch, as with `none`.
//!
//! Compared with `hash` (one task per partition, chosen by hash), a skewed stream no longer
//! leaves one task holding most of the buffered bytes (so spilling earlier than the others,
//! with a budget of total / tasks) and writing most of the files at the commit while the
//! others wait: the flush takes about total / tasks. The price: a partition heavier than a
//! task's share gets one file per task it is split over, each about a task's share in size.

use std::collections::HashMap;

/// Routes partition pieces to writer tasks by observed traffic (see the module doc).
#[derive(Debug)]
pub struct RangeDistributor {
    /// Decayed bytes per partition from past windows.
    stats: HashMap<String, u64>,
    /// This window's tasks of each partition, with the bytes each received of it.
    assignment: HashMap<String, Vec<(usize, u64)>>,
    /// Bytes routed to each task in this window.
    load: Vec<u64>,
    /// Bytes per partition in this window.
    window: HashMap<String, u64>,
}

impl RangeDistributor {
    /// A distributor over `tasks` writer tasks (at least one).
    pub fn new(tasks: usize) -> Self {
        Self {
            stats: HashMap::new(),
            assignment: HashMap::new(),
            load: vec![0; tasks.max(1)],
            window: HashMap::new(),
        }
    }

    /// The task for a piece of partition `label` of `bytes`; `round_robin` is the task of the
    /// current micro-batch, used until the first statistics exist.
    pub fn route(&mut self, label: &str, bytes: u64, round_robin: usize) -> usize {
        *self.window.entry(label.to_string()).or_default() += bytes;
        let task = if self.stats.is_empty() {
            round_robin % self.load.len()
        } else {
            let load = &self.load;
            let tasks = self
                .assignment
                .entry(label.to_string())
                .or_insert_with(|| vec![(least_loaded(load), 0)]);
            let slot = tasks
                .iter_mut()
                .min_by_key(|(task, fed)| (*fed, *task))
                .expect("every assigned partition has a task");
            slot.1 += bytes;
            slot.0
        };
        self.load[task] += bytes;
        task
    }

    /// A commit closed the window: its traffic joins the (halved) statistics, which assign
    /// the next window.
    pub fn end_window(&mut self) {
        for v in self.stats.values_mut() {
            *v /= 2;
        }
        for (label, bytes) in self.window.drain() {
            *self.stats.entry(label).or_default() += bytes;
        }
        self.stats.retain(|_, v| *v > 0);
        self.assignment = assign(&self.stats, self.load.len())
            .into_iter()
            .map(|(label, tasks)| (label, tasks.into_iter().map(|t| (t, 0)).collect()))
            .collect();
        self.load.iter_mut().for_each(|l| *l = 0);
    }

    /// The tasks of partition `label` in this window (empty before the first statistics or
    /// for a partition not seen yet).
    pub fn tasks_of(&self, label: &str) -> Vec<usize> {
        self.assignment
            .get(label)
            .map(|t| t.iter().map(|(task, _)| *task).collect())
            .unwrap_or_default()
    }
}

fn least_loaded(load: &[u64]) -> usize {
    (0..load.len()).min_by_key(|&i| (load[i], i)).unwrap_or(0)
}

/// Assigns partitions to `tasks` writer tasks by `weights` (bytes): heaviest first, each to
/// the least loaded task(s); a partition heavier than a task's share (total / tasks, rounded
/// up) is split evenly over `ceil(weight / share)` distinct tasks (at most all of them).
/// Deterministic: ties go to the lower task index and the smaller partition label.
pub fn assign(weights: &HashMap<String, u64>, tasks: usize) -> HashMap<String, Vec<usize>> {
    let tasks = tasks.max(1);
    let total: u64 = weights.values().sum();
    let share = total.div_ceil(tasks as u64).max(1);
    let mut parts: Vec<(&String, u64)> = weights.iter().map(|(k, v)| (k, *v)).collect();
    parts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut load = vec![0u64; tasks];
    let mut out = HashMap::with_capacity(parts.len());
    for (label, weight) in parts {
        let k = (weight.div_ceil(share) as usize).clamp(1, tasks);
        let mut order: Vec<usize> = (0..tasks).collect();
        order.sort_by_key(|&i| (load[i], i));
        let chosen: Vec<usize> = order[..k].to_vec();
        for &i in &chosen {
            load[i] += weight / k as u64;
        }
        out.insert(label.clone(), chosen);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(w: &[(&str, u64)]) -> HashMap<String, u64> {
        w.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// Bytes per task when every partition's weight is spread evenly over its tasks.
    fn loads(w: &HashMap<String, u64>, a: &HashMap<String, Vec<usize>>, tasks: usize) -> Vec<u64> {
        let mut load = vec![0; tasks];
        for (k, ts) in a {
            for t in ts {
                load[*t] += w[k] / ts.len() as u64;
            }
        }
        load
    }

    #[test]
    fn a_hot_partition_is_split_and_cold_ones_stay_whole() {
        // 80% of the traffic in one partition, four tasks.
        let w = weights(&[("hot", 800), ("a", 50), ("b", 50), ("c", 50), ("d", 50)]);
        let a = assign(&w, 4);
        assert_eq!(a["hot"].len(), 4, "800 over a share of 250: four tasks");
        for cold in ["a", "b", "c", "d"] {
            assert_eq!(a[cold].len(), 1, "{cold} goes to one task");
        }
        let load = loads(&w, &a, 4);
        assert!(load.iter().all(|l| *l <= 300), "{load:?}");
        // Hash would put the hot partition's 800 on one task whatever the others do.

        // Moderate skew: the hot partition needs only two tasks.
        let w = weights(&[("hot", 500), ("a", 200), ("b", 200), ("c", 100)]);
        let a = assign(&w, 4);
        assert_eq!(a["hot"].len(), 2);
        assert!(a
            .iter()
            .filter(|(k, _)| *k != "hot")
            .all(|(_, t)| t.len() == 1));
        let load = loads(&w, &a, 4);
        assert!(load.iter().all(|l| *l <= 300), "{load:?}");
    }

    #[test]
    fn even_traffic_gives_one_task_per_partition_balanced() {
        let w = weights(&[
            ("p0", 100),
            ("p1", 100),
            ("p2", 100),
            ("p3", 100),
            ("p4", 100),
            ("p5", 100),
        ]);
        let a = assign(&w, 3);
        assert!(a.values().all(|t| t.len() == 1));
        assert_eq!(loads(&w, &a, 3), [200, 200, 200]);
        assert_eq!(assign(&w, 3), a, "deterministic");
        assert!(assign(&HashMap::new(), 3).is_empty());
        assert_eq!(assign(&w, 1)["p0"], [0]);
    }

    #[test]
    fn the_distributor_learns_at_each_commit() {
        let mut d = RangeDistributor::new(4);
        // First window: no statistics, round robin by micro-batch.
        for batch in 0..8 {
            assert_eq!(d.route("hot", 80, batch), batch % 4);
            assert_eq!(d.route("cold", 20, batch), batch % 4);
        }
        d.end_window();
        let hot = d.tasks_of("hot");
        assert_eq!(
            hot.len(),
            4,
            "{hot:?}: 640 of 800 bytes over a share of 200"
        );
        assert_eq!(d.tasks_of("cold").len(), 1);
        // The hot partition's pieces rotate over its tasks by what each received.
        let mut seen = std::collections::BTreeSet::new();
        for batch in 0..8 {
            seen.insert(d.route("hot", 80, batch));
        }
        assert_eq!(seen.len(), 4);
        let cold = d.tasks_of("cold")[0];
        assert!((0..8).all(|b| d.route("cold", 20, b) == cold));
        // A new partition goes to the least loaded task and stays there for the window.
        let first = d.route("new", 10, 0);
        assert!((0..5).all(|b| d.route("new", 10, b) == first));
        // Traffic shifts: after a few windows of only "cold", it gets the tasks.
        for _ in 0..12 {
            d.end_window();
            for b in 0..8 {
                d.route("cold", 100, b);
            }
        }
        d.end_window();
        assert_eq!(d.tasks_of("cold").len(), 4);
        assert!(d.tasks_of("hot").is_empty(), "a quiet partition fades out");
    }
}

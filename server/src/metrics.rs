//! Counters and latency histograms, written as Prometheus text.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// The server's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Sandboxes created by forking (all `n` of each fork).
    pub forks: AtomicU64,
    /// Sandboxes created in all.
    pub created: AtomicU64,
    /// Sandboxes closed because their TTL passed.
    pub expired: AtomicU64,
    /// Snapshots taken or imported.
    pub snapshots: AtomicU64,
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<BTreeMap<String, Histogram>>,
}

impl Metrics {
    /// Record one answered request of `verb` (method and route).
    pub fn observe(&self, verb: &str, status: u16, seconds: f64) {
        if let Ok(mut r) = self.requests.lock() {
            *r.entry((verb.to_owned(), status)).or_default() += 1;
        }
        if let Ok(mut l) = self.latency.lock() {
            let h = l.entry(verb.to_owned()).or_default();
            for (i, b) in BUCKETS.iter().enumerate() {
                if seconds <= *b {
                    h.counts[i] += 1;
                }
            }
            h.count += 1;
            h.sum += seconds;
        }
    }

    /// Bump a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The Prometheus text exposition, with `live` sandboxes now.
    pub fn render(&self, live: usize) -> String {
        let mut s = String::new();
        let gauge = |s: &mut String, name: &str, help: &str, kind: &str, v: u64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        };
        gauge(
            &mut s,
            "arbor_sandboxes_live",
            "Sandboxes open now.",
            "gauge",
            live as u64,
        );
        gauge(
            &mut s,
            "arbor_sandboxes_created_total",
            "Sandboxes created.",
            "counter",
            self.created.load(Ordering::Relaxed),
        );
        gauge(
            &mut s,
            "arbor_forks_total",
            "Sandboxes created by forking (rate() of it is forks/s).",
            "counter",
            self.forks.load(Ordering::Relaxed),
        );
        gauge(
            &mut s,
            "arbor_snapshots_total",
            "Snapshots imported or taken.",
            "counter",
            self.snapshots.load(Ordering::Relaxed),
        );
        gauge(
            &mut s,
            "arbor_sandboxes_expired_total",
            "Sandboxes closed because their TTL passed.",
            "counter",
            self.expired.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            s,
            "# HELP arbor_requests_total Requests answered, by verb and status.\n# TYPE arbor_requests_total counter"
        );
        if let Ok(r) = self.requests.lock() {
            for ((verb, status), n) in r.iter() {
                let _ = writeln!(
                    s,
                    "arbor_requests_total{{verb=\"{}\",status=\"{status}\"}} {n}",
                    escape(verb)
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP arbor_request_seconds Request latency, by verb.\n# TYPE arbor_request_seconds histogram"
        );
        if let Ok(l) = self.latency.lock() {
            for (verb, h) in l.iter() {
                let v = escape(verb);
                for (i, b) in BUCKETS.iter().enumerate() {
                    let _ = writeln!(
                        s,
                        "arbor_request_seconds_bucket{{verb=\"{v}\",le=\"{b}\"}} {}",
                        h.counts[i]
                    );
                }
                let _ = writeln!(
                    s,
                    "arbor_request_seconds_bucket{{verb=\"{v}\",le=\"+Inf\"}} {}\narbor_request_seconds_sum{{verb=\"{v}\"}} {}\narbor_request_seconds_count{{verb=\"{v}\"}} {}",
                    h.count, h.sum, h.count
                );
            }
        }
        s
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labelled() {
        let m = Metrics::default();
        m.observe("POST /v1/sandboxes/{id}/exec", 200, 0.003);
        m.observe("POST /v1/sandboxes/{id}/exec", 200, 2.0);
        m.observe("GET /v1/health", 200, 0.0001);
        let text = m.render(2);
        assert!(text.contains("arbor_sandboxes_live 2"), "{text}");
        assert!(text.contains(
            "arbor_request_seconds_bucket{verb=\"POST /v1/sandboxes/{id}/exec\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "arbor_request_seconds_bucket{verb=\"POST /v1/sandboxes/{id}/exec\",le=\"2.5\"} 2"
        ));
        assert!(text.contains(
            "arbor_requests_total{verb=\"POST /v1/sandboxes/{id}/exec\",status=\"200\"} 2"
        ));
        assert!(text.contains("arbor_request_seconds_count{verb=\"GET /v1/health\"} 1"));
    }
}

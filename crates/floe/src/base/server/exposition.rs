//! The Prometheus text exposition (format 0.0.4) of floe's endpoints, through the `prometheus`
//! client's metric model and text encoder (which escapes label values and help texts).
//!
//! floe's numbers live in its own state (atomics, the maintenance service's tables), so each
//! scrape builds its [`Family`]s from a snapshot, in the order the endpoint lists them, and
//! [`encode`]s them. Sample values are written as the encoder writes an `f64` (`0.5`, `3`,
//! `NaN`, `inf`).

use prometheus::proto::{self, MetricType};
use prometheus::TextEncoder;

/// One metric family: name, help, type and its samples.
#[derive(Debug, Clone)]
pub struct Family(proto::MetricFamily);

impl Family {
    fn new(name: &str, help: &str, kind: MetricType) -> Self {
        let mut f = proto::MetricFamily::default();
        f.set_name(name.to_string());
        f.set_help(help.to_string());
        f.set_field_type(kind);
        Family(f)
    }

    /// A counter family (its samples are added with [`Self::sample`]).
    pub fn counter(name: &str, help: &str) -> Self {
        Self::new(name, help, MetricType::COUNTER)
    }

    /// A gauge family (its samples are added with [`Self::sample`]).
    pub fn gauge(name: &str, help: &str) -> Self {
        Self::new(name, help, MetricType::GAUGE)
    }

    /// A histogram of one series: `buckets` are (upper bound, count of observations up to it,
    /// cumulative), without the `+Inf` bucket (`count`).
    pub fn histogram(name: &str, help: &str, buckets: &[(f64, u64)], sum: f64, count: u64) -> Self {
        let mut h = proto::Histogram::default();
        h.set_bucket(
            buckets
                .iter()
                .map(|(upper, cumulative)| {
                    let mut b = proto::Bucket::default();
                    b.set_upper_bound(*upper);
                    b.set_cumulative_count(*cumulative);
                    b
                })
                .collect(),
        );
        h.set_sample_sum(sum);
        h.set_sample_count(count);
        let mut m = proto::Metric::default();
        m.set_histogram(h);
        let mut f = Self::new(name, help, MetricType::HISTOGRAM);
        f.0.mut_metric().push(m);
        f
    }

    /// Adds the sample of the series `labels` (name, value pairs) to a counter or gauge family.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Self {
        let mut m = proto::Metric::from_label(
            labels
                .iter()
                .map(|(name, value)| {
                    let mut l = proto::LabelPair::default();
                    l.set_name(name.to_string());
                    l.set_value(value.to_string());
                    l
                })
                .collect(),
        );
        if self.0.get_field_type() == MetricType::COUNTER {
            let mut c = proto::Counter::default();
            c.set_value(value);
            m.set_counter(c);
        } else {
            let mut g = proto::Gauge::default();
            g.set_value(value);
            m.set_gauge(g);
        }
        self.0.mut_metric().push(m);
        self
    }

    /// The family with one sample without labels.
    pub fn with_value(mut self, value: f64) -> Self {
        self.sample(&[], value);
        self
    }
}

/// The text exposition of `families`, in their order. A family without samples is left out
/// (the text format has nothing to show for it).
pub fn encode(families: Vec<Family>) -> String {
    let families: Vec<proto::MetricFamily> = families
        .into_iter()
        .map(|f| f.0)
        .filter(|f| !f.get_metric().is_empty())
        .collect();
    let mut out = String::new();
    if let Err(e) = TextEncoder::new().encode_utf8(&families, &mut out) {
        // Only a family without samples or without a name fails, and neither is encoded.
        tracing::warn!(error = %e, "prometheus exposition failed");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_in_order_escaped_with_empty_ones_left_out() {
        let mut jobs = Family::counter("jobs_total", "Jobs run.");
        jobs.sample(&[("job", "compact")], 2.0)
            .sample(&[("job", "a\"b\\c\nd")], 0.0);
        let text = encode(vec![
            Family::gauge("zeta", "Last gauge first.").with_value(0.25),
            Family::gauge("empty", "No sample."),
            jobs,
            Family::histogram("sizes", "Sizes.", &[(1048576.0, 1), (8.0e6, 2)], 12.0, 3),
        ]);
        assert_eq!(
            text,
            "# HELP zeta Last gauge first.\n# TYPE zeta gauge\nzeta 0.25\n\
             # HELP jobs_total Jobs run.\n# TYPE jobs_total counter\n\
             jobs_total{job=\"compact\"} 2\njobs_total{job=\"a\\\"b\\\\c\\nd\"} 0\n\
             # HELP sizes Sizes.\n# TYPE sizes histogram\n\
             sizes_bucket{le=\"1048576\"} 1\nsizes_bucket{le=\"8000000\"} 2\n\
             sizes_bucket{le=\"+Inf\"} 3\nsizes_sum 12\nsizes_count 3\n"
        );
    }
}

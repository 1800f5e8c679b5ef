//! Building the metric families of one scrape: gauges, counters and histograms with their label
//! sets, in the shapes the `prometheus` crate's text encoder writes.

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};

/// Labels of one series, beyond the registry's constant ones.
pub(super) type Labels = Vec<(&'static str, String)>;

/// One histogram series: its labels, the count per bucket (not cumulative; the last is +Inf),
/// the number of observations and their sum.
pub(super) struct HistogramRow {
    pub(super) labels: Labels,
    pub(super) buckets: Vec<u64>,
    pub(super) count: u64,
    pub(super) sum: f64,
}

/// The families of one scrape.
#[derive(Default)]
pub(super) struct Families(Vec<MetricFamily>);

impl Families {
    fn family(&mut self, name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) {
        let mut family = MetricFamily::default();
        family.set_name(name.to_owned());
        family.set_help(help.to_owned());
        family.set_field_type(kind);
        family.set_metric(metrics);
        self.0.push(family);
    }

    /// A gauge with one series per row. A family without rows is left out (the text format has
    /// no empty families).
    pub(super) fn gauge(&mut self, name: &str, help: &str, rows: &[(Labels, i64)]) {
        if rows.is_empty() {
            return;
        }
        let metrics = rows
            .iter()
            .map(|(labels, value)| {
                let mut gauge = Gauge::default();
                gauge.set_value(*value as f64);
                let mut metric = Metric::from_gauge(gauge);
                metric.set_label(label_pairs(labels));
                metric
            })
            .collect();
        self.family(name, help, MetricType::GAUGE, metrics);
    }

    /// A counter without labels; `name` ends with `_total`.
    pub(super) fn counter(&mut self, name: &str, help: &str, value: u64) {
        let mut counter = Counter::default();
        counter.set_value(value as f64);
        let mut metric = Metric::default();
        metric.set_counter(counter);
        self.family(name, help, MetricType::COUNTER, vec![metric]);
    }
}

fn label_pairs(labels: &Labels) -> Vec<LabelPair> {
    labels
        .iter()
        .map(|(k, v)| {
            let mut pair = LabelPair::default();
            pair.set_name((*k).to_owned());
            pair.set_value(v.clone());
            pair
        })
        .collect()
}

impl Families {
    /// The families, in the order they were added.
    pub(super) fn into_inner(self) -> Vec<MetricFamily> {
        self.0
    }

    /// A counter with one series per row; `name` ends with `_total`.
    pub(super) fn counters(&mut self, name: &str, help: &str, rows: &[(Labels, u64)]) {
        if rows.is_empty() {
            return;
        }
        let metrics = rows
            .iter()
            .map(|(labels, value)| {
                let mut counter = Counter::default();
                counter.set_value(*value as f64);
                let mut metric = Metric::default();
                metric.set_counter(counter);
                metric.set_label(label_pairs(labels));
                metric
            })
            .collect();
        self.family(name, help, MetricType::COUNTER, metrics);
    }

    /// A histogram with upper bounds `bounds` (+Inf implied) and one series per row.
    pub(super) fn histogram(
        &mut self,
        name: &str,
        help: &str,
        bounds: &[f64],
        rows: &[HistogramRow],
    ) {
        if rows.is_empty() {
            return;
        }
        let metrics = rows
            .iter()
            .map(|row| {
                let mut cumulative = 0;
                let buckets = bounds
                    .iter()
                    .zip(&row.buckets)
                    .map(|(bound, n)| {
                        cumulative += n;
                        let mut bucket = Bucket::default();
                        bucket.set_upper_bound(*bound);
                        bucket.set_cumulative_count(cumulative);
                        bucket
                    })
                    .collect();
                let mut histogram = Histogram::default();
                histogram.set_bucket(buckets);
                histogram.set_sample_count(row.count);
                histogram.set_sample_sum(row.sum);
                let mut metric = Metric::default();
                metric.set_histogram(histogram);
                metric.set_label(label_pairs(&row.labels));
                metric
            })
            .collect();
        self.family(name, help, MetricType::HISTOGRAM, metrics);
    }
}

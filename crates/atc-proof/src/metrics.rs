//! One counter read from the daemon's `GET /metrics` (Prometheus text), for suites that need
//! to know when the daemon has counted something it reports no other way (a client's queue
//! overflowing, before its `desync` frame is sent).

use anyhow::Context as _;

/// The value of the unlabelled sample `name` (e.g. `atc_client_desyncs_total`).
pub async fn counter(url: &str, token: &str, name: &str) -> anyhow::Result<u64> {
    let mut answer = awc::Client::default()
        .get(format!("{url}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("GET /metrics: {e}"))?;
    let body = answer
        .body()
        .limit(4 * 1024 * 1024)
        .await
        .map_err(|e| anyhow::anyhow!("reading /metrics: {e}"))?;
    let text = String::from_utf8_lossy(&body);
    sample(&text, name).with_context(|| format!("no {name} in /metrics"))
}

/// `name`'s value in Prometheus text.
fn sample(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(' ')?;
        rest.split_whitespace()
            .next()?
            .parse::<f64>()
            .ok()
            .map(|v| v as u64)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_sample_is_found_by_its_whole_name() {
        let text = "# TYPE atc_client_desyncs counter\natc_client_desyncs_total 3\n\
                    atc_client_desyncs_total_x 9\n";
        assert_eq!(super::sample(text, "atc_client_desyncs_total"), Some(3));
        assert_eq!(super::sample(text, "atc_client"), None);
    }
}

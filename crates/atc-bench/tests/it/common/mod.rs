//! What the bench's integration tests share: its arguments from command-line words, and a run
//! with its report as JSON.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: atc_bench::BenchArgs,
}

/// The bench's arguments from the words after `bench`, as its command line would give them.
pub fn args(words: &[&str]) -> atc_bench::BenchArgs {
    Cli::try_parse_from(std::iter::once("bench").chain(words.iter().copied()))
        .expect("arguments parse")
        .bench
}

/// Runs the bench against `url` with `token` (both empty when no phase needs a daemon), and
/// returns its report and the report's JSON.
pub async fn run(
    args: atc_bench::BenchArgs,
    url: String,
    token: String,
) -> (atc_bench::Report, serde_json::Value) {
    let report = atc_bench::run(args, url, token)
        .await
        .expect("the run starts");
    let json = serde_json::from_str(&report.to_json().expect("serializes")).expect("valid JSON");
    (report, json)
}

//! Runs the impd simulator on its own, so an atc `imp` target can be pointed at it:
//!
//! ```text
//! cargo run -p impd-sim -- --listen 127.0.0.1:7070 [--token-file PATH]
//! ```
//!
//! It prints the URL, the token file and a target entry for atc's config. Imps, sessions and
//! leases live in memory until the simulator exits (Ctrl-C); sessions run as real processes on
//! this machine.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use impd_sim::{Features, ImpdSim, SimOptions};

/// A simulated impd (the imp control plane) for trying atc's `imp` provider locally.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
    /// Also write the root token to this file (it is always in a temp dir too).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Use this root token instead of a random one.
    #[arg(long)]
    token: Option<String>,
    /// Play an impd from before feature flags (no features, leases or offsets).
    #[arg(long)]
    no_features: bool,
    /// Play an impd without leases (`/rpc/leases/*` answers 404).
    #[arg(long)]
    no_leases: bool,
    /// Play an impd without session offsets (no `started.output`).
    #[arg(long)]
    no_offsets: bool,
    /// RAM budget in MiB for the simulated governor (unlimited by default).
    #[arg(long)]
    ram_budget_mib: Option<u64>,
    /// Imps that exist (running) from the start.
    #[arg(long = "imp")]
    imps: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let features = (!args.no_features).then(|| Features {
        leases: !args.no_leases,
        session_offsets: !args.no_offsets,
        ..Features::all()
    });
    let sim = ImpdSim::try_start(SimOptions {
        listen: args.listen,
        token: args.token,
        features,
        ram_budget_mib: args.ram_budget_mib,
        imps: args.imps,
        ..SimOptions::default()
    })?;
    let token_file = match args.token_file {
        Some(path) => {
            std::fs::write(&path, format!("{}\n", sim.token()))?;
            path
        }
        None => sim.token_file().to_path_buf(),
    };
    let target = serde_json::json!({
        "provider": "imp",
        "url": sim.url(),
        "tokenFile": token_file,
    });
    println!("impd simulator listening on {}", sim.url());
    println!("token file: {}", token_file.display());
    println!("atc target: {target}");
    println!("Ctrl-C to stop");
    loop {
        std::thread::park();
    }
}

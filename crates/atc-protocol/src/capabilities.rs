//! The capabilities a target's provider may have (spec §4.3): the closed set, and the set a
//! provider has, as `GET /v1/agents` lists it and refusals name it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One thing a provider may or may not be able to do (spec §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Start a harness.
    Spawn,
    /// Stream output to clients.
    Attach,
    /// Write keystrokes.
    Input,
    /// End a harness.
    Kill,
    /// Unpack a tar into a directory on the host.
    Transfer,
    /// Run a command to completion.
    Run,
    /// Run an agent turn without a terminal.
    Headless,
    /// Put a host to sleep with its harnesses inside.
    Suspend,
    /// Delete a host and everything on it.
    Destroy,
}

impl Capability {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Spawn => "spawn",
            Capability::Attach => "attach",
            Capability::Input => "input",
            Capability::Kill => "kill",
            Capability::Transfer => "transfer",
            Capability::Run => "run",
            Capability::Headless => "headless",
            Capability::Suspend => "suspend",
            Capability::Destroy => "destroy",
        }
    }
}

/// What a target's provider can do (spec §4.3): the daemon's refusal chain reads these and
/// `GET /v1/agents` lists them per target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Capabilities {
    /// Start a harness.
    pub spawn: bool,
    /// Attach clients.
    pub attach: bool,
    /// Write input.
    pub input: bool,
    /// Resize the terminal.
    pub resize: bool,
    /// Kill a harness.
    pub kill: bool,
    /// Unpack a tar into a host directory.
    pub transfer: bool,
    /// Run a command to completion.
    pub run: bool,
    /// Agent turns without a terminal.
    pub headless: bool,
    /// Sleep a host.
    pub suspend: bool,
    /// Delete a host.
    pub destroy: bool,
    /// Run agents whose credential stays in impd's broker (spec §6).
    #[serde(rename = "brokerAuth", default)]
    pub broker_auth: bool,
}

impl Capabilities {
    /// Whether `c` is among them.
    pub fn has(self, c: Capability) -> bool {
        match c {
            Capability::Spawn => self.spawn,
            Capability::Attach => self.attach,
            Capability::Input => self.input,
            Capability::Kill => self.kill,
            Capability::Transfer => self.transfer,
            Capability::Run => self.run,
            Capability::Headless => self.headless,
            Capability::Suspend => self.suspend,
            Capability::Destroy => self.destroy,
        }
    }

    /// Nothing at all: what a target whose provider this daemon lacks lists.
    pub const NONE: Capabilities = Capabilities {
        spawn: false,
        attach: false,
        input: false,
        resize: false,
        kill: false,
        transfer: false,
        run: false,
        headless: false,
        suspend: false,
        destroy: false,
        broker_auth: false,
    };
}

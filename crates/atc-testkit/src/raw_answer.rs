//! [`RawAnswer`]: an HTTP answer read off a raw TCP connection, for tests that write request
//! bytes themselves (malformed heads, trickled heads) and so cannot use the HTTP client.

use serde_json::Value;

/// An answer read off a raw connection: its status, its head as text, its body as JSON.
#[derive(Debug)]
pub struct RawAnswer {
    /// The status code.
    pub status: u16,
    /// The status line and the headers.
    pub head: String,
    /// The body, parsed (`Null` when it is not JSON).
    pub body: Value,
}

impl RawAnswer {
    /// The value of header `name` (any case), if the head has it.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// The body length a head announces (`content-length`, any case); 0 without one.
pub fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0)
}

//! What can be wrong with a request before it reaches a session: its head, body, query, a
//! parameter, or a frame on a socket. Every variant names the part at fault, which the wire
//! carries as `data.field` of a `bad_args` (see `crate::server::error`).

/// A request, or one of its parameters, that the daemon cannot act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The request head itself is malformed (see `server::head_guard`).
    #[error("{0}; fix the request and send it again")]
    Head(HeadProblem),
    /// The body parsed as JSON but is not an object.
    #[error("request body must be a JSON object")]
    BodyNotObject,
    /// The body is not JSON.
    #[error("request body is not valid JSON ({0})")]
    BodyNotJson(String),
    /// A key given twice in one object of a body or frame (`field` is its path); refused, since
    /// readers that keep the first and the last would disagree about what was asked.
    #[error("'{field}' is given more than once; give each key once")]
    DuplicateKey {
        /// The key's path: nested keys joined with `.`, array items as `[i]`.
        field: String,
    },
    /// The connection failed while the body was read.
    #[error("could not read the body: {0}")]
    BodyUnreadable(String),
    /// The body did not arrive in time (408): the client sends it too slowly.
    #[error("the request body did not arrive within {within_ms} ms")]
    BodyTooSlow {
        /// The bound, in milliseconds.
        within_ms: u128,
    },
    /// A body (chunked, so with no declared length) grew past the cap.
    #[error("request body exceeds the {cap}-byte limit")]
    BodyTooLarge {
        /// The cap in bytes.
        cap: usize,
    },
    /// A body whose `Content-Length` is past the cap, refused before it is read (413).
    #[error("request body of {declared} bytes exceeds the {cap}-byte limit")]
    DeclaredTooLarge {
        /// What the head declared.
        declared: u64,
        /// The cap in bytes.
        cap: usize,
    },
    /// The query string does not parse.
    #[error("bad query string: {0}")]
    BadQuery(String),
    /// A socket route reached without a WebSocket upgrade.
    #[error("not a WebSocket upgrade: {0}")]
    NotUpgrade(String),
    /// A body field the request does not have (`field` is its path): refused, not dropped,
    /// so a client never believes it asked for something it did not get.
    #[error("'{field}' is not a field of this request; the API in README lists them")]
    UnknownField {
        /// The field's path.
        field: String,
    },
    /// A body field the spec reserves for a part of atc not built yet.
    #[error("'{field}' is not supported by this daemon yet; leave it out")]
    Reserved {
        /// The field.
        field: String,
    },
    /// A body field that does not read as its type, or a required one that is absent.
    #[error("'{field}' {problem}")]
    BadField {
        /// The field's path.
        field: String,
        /// What is wrong, e.g. "is required" or serde's "invalid type: ..., expected ...".
        problem: String,
    },
    /// A parameter of the wrong JSON type or shape.
    #[error("'{field}' must be {expected}")]
    WrongType {
        /// The parameter.
        field: String,
        /// What it must be, e.g. "a string".
        expected: &'static str,
    },
    /// A required parameter is absent.
    #[error("'{field}' is required{hint}")]
    Missing {
        /// The parameter.
        field: &'static str,
        /// What it is, appended to the message (may be empty).
        hint: &'static str,
    },
    /// A parameter given empty where it may not be.
    #[error("'{field}' must not be empty")]
    Empty {
        /// The parameter.
        field: &'static str,
    },
    /// One of a pair of parameters given without the other.
    #[error("give {field} with {with}")]
    Unpaired {
        /// The one missing.
        field: &'static str,
        /// The one given.
        with: &'static str,
    },
    /// A number outside its range.
    #[error("'{field}' must be {range}")]
    OutOfRange {
        /// The parameter.
        field: &'static str,
        /// Its range in words, e.g. "1 to 200".
        range: &'static str,
    },
    /// A trail cursor this daemon did not give out.
    #[error("not a cursor this daemon gave out")]
    BadCursor,
    /// An `Idempotency-Key` header outside the allowed shape.
    #[error("Idempotency-Key must be 1-200 visible characters")]
    BadIdempotencyKey,
    /// A text frame on the attach socket that is not JSON.
    #[error("text frames must be JSON like {{\"type\":\"resize\",\"cols\":80,\"rows\":24}}")]
    FrameNotJson,
    /// A text frame of a type the attach socket does not take.
    #[error("unknown frame type '{0}'; send input as binary frames")]
    UnknownFrame(String),
    /// Input on an attach socket opened with `mode=watch`; it was not written.
    #[error(
        "watch-only attach: input is not sent to the session; attach without mode=watch to type"
    )]
    WatchOnly,
    /// No route has this method and path.
    #[error("no route {method} {path}; see the API in README")]
    NoRoute {
        /// The request's method.
        method: String,
        /// The request's path.
        path: String,
    },
}

/// The part of a request head that the head guard refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeadProblem {
    /// Over the head limits (431).
    #[error("the request head is too large (over {max_bytes} bytes, or over 96 headers)")]
    TooLarge {
        /// The byte limit.
        max_bytes: usize,
    },
    /// The method is not a token.
    #[error("the request method is not a valid token")]
    Method,
    /// The request target is not a URI.
    #[error("the request target is not a valid URI")]
    Uri,
    /// Neither HTTP/1.0 nor HTTP/1.1.
    #[error("the HTTP version is not HTTP/1.0 or HTTP/1.1")]
    Version,
    /// A header the parser refuses.
    #[error(
        "a header is malformed: a control byte, a bad or repeated Content-Length, a \
         Transfer-Encoding other than chunked, or a missing or repeated Host"
    )]
    Headers,
    /// The head was not complete in time (408): from the accept for a connection's first
    /// request, from its first byte for each later one.
    #[error("the request head did not arrive within {within_ms} ms; send a request's head whole")]
    TooSlow {
        /// The bound, in milliseconds.
        within_ms: u64,
    },
}

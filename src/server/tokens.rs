//! The bearer tokens the daemon accepts: the token file's format, the set read from it, and
//! the holder every request and every socket reads the current set from.
//!
//! The token file (`<state dir>/token`) holds one or two tokens, one per line. The first is
//! the current one (clients use it); a second line is the previous token, still accepted while
//! clients move over, and dropped by the next rotation. Surrounding whitespace and blank lines
//! are ignored. A token is at least [`MIN_TOKEN_BYTES`] bytes of visible ASCII (no spaces), so
//! it can go into a header as is. Anything else (no token, three tokens, a short token,
//! non-text) makes the file invalid, and an invalid file accepts nothing: the daemon fails
//! closed until a good file is in place and it is told to re-read it (SIGHUP).
//!
//! Each configured principal has a file of its own in the same format
//! (`<state dir>/principals/<id>`); a token there speaks for that principal ([`Who`]). A
//! principal's file that cannot be used refuses only that principal; the owner's file that
//! cannot be used refuses everyone.
//!
//! Reading the files is the daemon's job (`daemon/token_file.rs`, `daemon/principal_files.rs`);
//! this module only parses them and holds the result. Nothing here prints a token: [`TokenSet`]'s `Debug` is redacted and
//! [`TokenFileError`] names lines and lengths, never content.

use std::collections::BTreeMap;
use std::future::Future;

use actix::{ActorContext, ActorFutureExt, AsyncContext};
use tokio::sync::watch;

use super::keep_alive::SocketPeer;
use crate::sessions::client_queue::Outgoing;

/// The shortest token the file may hold (spec §1.2: tokens are at least 32 bytes).
pub const MIN_TOKEN_BYTES: usize = 32;

/// How many tokens the file may hold: the current one and, during a rotation, the previous.
pub const MAX_TOKENS: usize = 2;

/// Why a token file cannot be used. Never carries a token or a piece of one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read (missing, permissions, I/O).
    #[error("the token file could not be read: {reason}")]
    Unreadable {
        /// The I/O error's text (it names no content).
        reason: String,
    },
    /// Something other than a regular file is at the path (a FIFO would block the read, a
    /// device would never end it).
    #[error("the token file is {kind}; it must be a regular file")]
    NotRegular {
        /// What is there instead, e.g. "a FIFO".
        kind: &'static str,
    },
    /// A symlink at the path leads out of the state dir (or nowhere).
    #[error("the token file is a symlink leading out of the state dir; put the file itself there")]
    LeadsOutside,
    /// The file belongs to another user.
    #[error("the token file belongs to uid {uid}, not to the daemon's user (uid {owner})")]
    NotOwned {
        /// The file's owner.
        uid: u32,
        /// The daemon's effective uid.
        owner: u32,
    },
    /// Group or others have some permission on the file, so others may read the token (or
    /// write one).
    #[error("the token file has mode {mode:04o}, which lets others read or change it; make it private (chmod 600)")]
    OpenToOthers {
        /// The file's permission bits.
        mode: u32,
    },
    /// Larger than any token set.
    #[error("the token file is {len} bytes; a token file holds at most {cap}")]
    TooLarge {
        /// Its size (or what was read of it).
        len: u64,
        /// The largest read.
        cap: u64,
    },
    /// The file is not UTF-8 text.
    #[error("the token file is not text")]
    NotText,
    /// Nothing but whitespace.
    #[error("the token file holds no token")]
    Empty,
    /// More tokens than [`MAX_TOKENS`].
    #[error("the token file holds {count} tokens; it holds one, or two while clients move from the second to the first")]
    TooMany {
        /// How many non-blank lines it has.
        count: usize,
    },
    /// A token shorter than [`MIN_TOKEN_BYTES`].
    #[error("the token on line {line} is {len} bytes; a token has at least {MIN_TOKEN_BYTES}")]
    TooShort {
        /// 1-based line number.
        line: usize,
        /// Its length.
        len: usize,
    },
    /// A token with a space, a control byte or non-ASCII inside it.
    #[error("the token on line {line} has a character a token cannot have (only visible ASCII, no spaces)")]
    BadCharacter {
        /// 1-based line number.
        line: usize,
    },
    /// A principal's file holds a token that the owner's file, or another principal's, holds
    /// too: who that token speaks for would be a guess, so the principal gets none.
    #[error("the token file holds a token that {other} holds too; each principal needs a token of its own")]
    Shared {
        /// Whose file holds it too: "the owner's token file" or "principal `<id>`'s file".
        other: String,
    },
}

/// One or two valid tokens, the current one first.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSet(Vec<String>);

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenSet({} tokens, redacted)", self.0.len())
    }
}

impl TokenSet {
    /// Parses the token file's bytes (format in the module doc).
    pub fn parse(bytes: &[u8]) -> Result<TokenSet, TokenFileError> {
        let text = std::str::from_utf8(bytes).map_err(|_| TokenFileError::NotText)?;
        let mut tokens = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let token = line.trim();
            if token.is_empty() {
                continue;
            }
            let line = index + 1;
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(TokenFileError::BadCharacter { line });
            }
            if token.len() < MIN_TOKEN_BYTES {
                return Err(TokenFileError::TooShort {
                    line,
                    len: token.len(),
                });
            }
            tokens.push(token.to_string());
        }
        match tokens.len() {
            0 => Err(TokenFileError::Empty),
            n if n > MAX_TOKENS => Err(TokenFileError::TooMany { count: n }),
            _ => Ok(TokenSet(tokens)),
        }
    }

    /// A set of one freshly minted token.
    pub fn single(token: String) -> TokenSet {
        TokenSet(vec![token])
    }

    /// The current token: the one clients should use.
    pub fn current(&self) -> &str {
        &self.0[0]
    }

    /// How many tokens the set holds (1 or 2).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a set holds at least one token. (For clippy's `len_without_is_empty`.)
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `given` is one of the tokens. Every token is compared in full, so timing says
    /// neither which one matched nor how much of a guess was right.
    pub fn accepts(&self, given: &[u8]) -> bool {
        self.0
            .iter()
            .fold(false, |hit, t| constant_time_eq(given, t.as_bytes()) | hit)
    }
}

/// Compares without an early exit, so timing does not tell how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who a token speaks for: the owner (the token file), or a configured principal (its own
/// file under `<state dir>/principals/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// The daemon's owner.
    Owner,
    /// The principal with this id.
    Principal(String),
}

/// The tokens accepted while the owner's file is good: the owner's set and, by principal id,
/// each configured principal's set, or why that principal's file cannot be used (then only
/// that principal is refused: it fails closed, the owner and the others are untouched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSets {
    owner: TokenSet,
    principals: BTreeMap<String, Result<TokenSet, TokenFileError>>,
}

impl TokenSets {
    /// The owner's set and the principals' (by id; an `Err` accepts nothing for that id).
    /// A principal whose token is also the owner's or another principal's gets
    /// [`TokenFileError::Shared`] instead of its set (both principals, when two share one):
    /// a token speaks for exactly one.
    pub fn new(
        owner: TokenSet,
        mut principals: BTreeMap<String, Result<TokenSet, TokenFileError>>,
    ) -> TokenSets {
        let shared: Vec<(String, String)> = principals
            .iter()
            .filter_map(|(id, set)| {
                let set = set.as_ref().ok()?;
                let holds = |other: &TokenSet| set.0.iter().any(|t| other.0.contains(t));
                if holds(&owner) {
                    return Some((id.clone(), "the owner's token file".to_string()));
                }
                principals.iter().find_map(|(other_id, other)| match other {
                    Ok(other) if other_id != id && holds(other) => {
                        Some((id.clone(), format!("principal {other_id}'s file")))
                    }
                    _ => None,
                })
            })
            .collect();
        for (id, other) in shared {
            principals.insert(id, Err(TokenFileError::Shared { other }));
        }
        TokenSets { owner, principals }
    }

    /// Only the owner's set: a daemon with no principals configured.
    pub fn owner_only(owner: TokenSet) -> TokenSets {
        TokenSets::new(owner, BTreeMap::new())
    }

    /// The owner's set.
    pub fn owner(&self) -> &TokenSet {
        &self.owner
    }

    /// Each configured principal's set, or why its file cannot be used.
    pub fn principals(&self) -> &BTreeMap<String, Result<TokenSet, TokenFileError>> {
        &self.principals
    }

    /// Who `given` speaks for, if anyone. Every set is compared in full whatever matched
    /// first, so timing tells neither which one matched nor how much of a guess was right
    /// (only how many sets there are, which config already says). [`TokenSets::new`] keeps
    /// a token in one set only; were it in more, the owner would win, then the first id.
    pub fn who(&self, given: &[u8]) -> Option<Who> {
        let owner = self.owner.accepts(given);
        let principal = self
            .principals
            .iter()
            .fold(None, |hit, (id, set)| match set {
                Ok(set) if set.accepts(given) => hit.or(Some(id)),
                _ => hit,
            });
        match (owner, principal) {
            (true, _) => Some(Who::Owner),
            (false, Some(id)) => Some(Who::Principal(id.clone())),
            (false, None) => None,
        }
    }

    /// Whether `given` is the owner's or any principal's token.
    pub fn accepts(&self, given: &[u8]) -> bool {
        self.who(given).is_some()
    }
}

/// What the daemon accepts right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenState {
    /// The owner's file was good: these tokens are accepted.
    Valid(TokenSets),
    /// The owner's file could not be used at the last read: nothing is accepted, a
    /// principal's token neither, until a good file is read (fail closed).
    Invalid(TokenFileError),
}

impl TokenState {
    /// Who `given` speaks for in this state, if anyone.
    pub fn who(&self, given: &[u8]) -> Option<Who> {
        match self {
            TokenState::Valid(sets) => sets.who(given),
            TokenState::Invalid(_) => None,
        }
    }

    /// Whether `given` is accepted in this state, as the owner's or any principal's.
    pub fn accepts(&self, given: &[u8]) -> bool {
        self.who(given).is_some()
    }
}

/// The current token state, shared by every worker's `AppState` and every socket.
///
/// Shared because it is configuration that every request reads and a reload (SIGHUP) changes
/// under running connections. A `watch` channel fits both readers: a request's check is a
/// short read lock (`borrow`, never held across an await), and a socket waits on `changed`
/// to learn that its token went away. The daemon keeps the one [`TokenPublisher`].
#[derive(Clone)]
pub struct Tokens {
    rx: watch::Receiver<TokenState>,
}

/// The writing end of [`Tokens`], held by the daemon, which re-reads the file on SIGHUP.
pub struct TokenPublisher {
    tx: watch::Sender<TokenState>,
}

impl Tokens {
    /// A holder starting at `state`, and its publisher.
    pub fn new(state: TokenState) -> (TokenPublisher, Tokens) {
        let (tx, rx) = watch::channel(state);
        (TokenPublisher { tx }, Tokens { rx })
    }

    /// Runs `f` on the current state. The read lock is held only for the call, so `f` must
    /// be quick and cannot await.
    pub fn with_current<R>(&self, f: impl FnOnce(&TokenState) -> R) -> R {
        f(&self.rx.borrow())
    }

    /// Resolves once `token` no longer speaks for whom it speaks for now: it is refused, or
    /// it moved to another principal's file (at once, if it is not accepted now). Never
    /// resolves if the daemon drops the publisher, which happens only as it stops.
    pub fn revoked(&self, token: String) -> impl Future<Output = ()> + 'static {
        let mut rx = self.rx.clone();
        async move {
            let first = rx.borrow().who(token.as_bytes());
            loop {
                let now = rx.borrow_and_update().who(token.as_bytes());
                if now.is_none() || now != first {
                    return;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

impl TokenPublisher {
    /// Makes `state` the current one for every request and socket from now on.
    pub fn publish(&self, state: TokenState) {
        self.tx.send_replace(state);
    }

    /// A reader of what this publishes.
    pub fn subscribe(&self) -> Tokens {
        Tokens {
            rx: self.tx.subscribe(),
        }
    }
}

/// Closes a socket once the token it opened with is no longer accepted: `notice` (a text
/// frame, if any) goes out first, then a close, then the actor stops.
pub fn drop_when_revoked<A: SocketPeer>(
    ctx: &mut actix::Context<A>,
    tokens: &Tokens,
    token: String,
    client: crate::sessions::messages::ClientId,
    notice: Option<String>,
) {
    ctx.spawn(actix::fut::wrap_future::<_, A>(tokens.revoked(token)).map(
        move |(), act: &mut A, ctx: &mut actix::Context<A>| {
            tracing::info!(
                client = client.0,
                "socket's token no longer accepted; closing it"
            );
            if let Some(text) = notice {
                act.queue().push_text(text);
            }
            act.queue().push(Outgoing::Close);
            ctx.stop();
        },
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccccccc";
    const D: &str = "dddddddddddddddddddddddddddddddddddd";

    fn owner_only(set: TokenSet) -> TokenState {
        TokenState::Valid(TokenSets::owner_only(set))
    }

    /// The owner on A; `ci` on B (and C while it moves over); `bot` on a file it cannot use.
    fn with_principals() -> TokenState {
        let principals = [
            (
                "ci".to_string(),
                TokenSet::parse(format!("{B}\n{C}").as_bytes()),
            ),
            ("bot".to_string(), Err(TokenFileError::Empty)),
        ]
        .into();
        TokenState::Valid(TokenSets::new(TokenSet::single(A.into()), principals))
    }

    #[test]
    fn who_names_the_owner_or_the_principal_whose_file_holds_the_token() {
        let state = with_principals();
        assert_eq!(state.who(A.as_bytes()), Some(Who::Owner));
        assert_eq!(state.who(B.as_bytes()), Some(Who::Principal("ci".into())));
        assert_eq!(state.who(C.as_bytes()), Some(Who::Principal("ci".into())));
        assert_eq!(state.who(D.as_bytes()), None);
        assert_eq!(state.who(b""), None);
        assert!(state.accepts(A.as_bytes()) && state.accepts(C.as_bytes()));
        assert!(!state.accepts(D.as_bytes()));
        // An owner's file that cannot be used refuses the principals' tokens too.
        let closed = TokenState::Invalid(TokenFileError::Empty);
        assert_eq!(closed.who(B.as_bytes()), None);
    }

    #[test]
    fn a_principal_sharing_a_token_with_the_owner_or_another_gets_none() {
        let principals = [
            (
                "ci".to_string(),
                TokenSet::parse(format!("{B}\n{A}").as_bytes()),
            ),
            ("x".to_string(), Ok(TokenSet::single(C.into()))),
            (
                "y".to_string(),
                TokenSet::parse(format!("{D}\n{C}").as_bytes()),
            ),
            ("z".to_string(), Ok(TokenSet::single(D.into()))),
        ]
        .into();
        let sets = TokenSets::new(TokenSet::single(A.into()), principals);
        let problem = |id: &str| sets.principals()[id].clone().unwrap_err();
        assert_eq!(
            problem("ci"),
            TokenFileError::Shared {
                other: "the owner's token file".into()
            }
        );
        assert_eq!(
            problem("x"),
            TokenFileError::Shared {
                other: "principal y's file".into()
            }
        );
        assert!(matches!(problem("y"), TokenFileError::Shared { .. }));
        assert!(matches!(problem("z"), TokenFileError::Shared { .. }));
        assert!(!problem("x").to_string().contains(C));
        let state = TokenState::Valid(sets);
        assert_eq!(state.who(A.as_bytes()), Some(Who::Owner));
        for t in [B, C, D] {
            assert_eq!(state.who(t.as_bytes()), None);
        }
    }

    #[tokio::test]
    async fn revoked_resolves_when_the_token_moves_to_another_principal() {
        let ci = [("ci".to_string(), Ok(TokenSet::single(B.into())))].into();
        let owner = TokenSet::single(A.into());
        let (publisher, tokens) = Tokens::new(TokenState::Valid(TokenSets::new(owner.clone(), ci)));
        let mut gone = Box::pin(tokens.revoked(B.into()));
        let quick = std::time::Duration::from_millis(50);
        assert!(tokio::time::timeout(quick, &mut gone).await.is_err());
        let bot = [("bot".to_string(), Ok(TokenSet::single(B.into())))].into();
        publisher.publish(TokenState::Valid(TokenSets::new(owner, bot)));
        tokio::time::timeout(quick, &mut gone).await.unwrap();
    }

    #[test]
    fn one_or_two_tokens_one_per_line() {
        let one = TokenSet::parse(format!("{A}\n").as_bytes()).unwrap();
        assert_eq!((one.len(), one.current()), (1, A));
        let two = TokenSet::parse(format!("\n  {B}\r\n\n{A}  \n").as_bytes()).unwrap();
        assert_eq!((two.len(), two.current()), (2, B));
        assert!(two.accepts(A.as_bytes()) && two.accepts(B.as_bytes()));
        assert!(!two.accepts(&A.as_bytes()[1..]));
        assert!(!two.accepts(b""));
    }

    #[test]
    fn what_the_file_cannot_hold() {
        let parse = |s: &[u8]| TokenSet::parse(s).unwrap_err();
        assert_eq!(parse(b""), TokenFileError::Empty);
        assert_eq!(parse(b" \n\t\n"), TokenFileError::Empty);
        assert_eq!(
            parse(format!("{A}\n{B}\n{A}\n").as_bytes()),
            TokenFileError::TooMany { count: 3 }
        );
        assert_eq!(
            parse(format!("{A}\nshort\n").as_bytes()),
            TokenFileError::TooShort { line: 2, len: 5 }
        );
        assert_eq!(
            parse(format!("{A} {B}").as_bytes()),
            TokenFileError::BadCharacter { line: 1 }
        );
        assert_eq!(parse(&[0xff; 40]), TokenFileError::NotText);
        assert_eq!(
            parse("é".repeat(20).as_bytes()),
            TokenFileError::BadCharacter { line: 1 }
        );
    }

    #[test]
    fn nothing_prints_a_token() {
        let set = TokenSet::parse(A.as_bytes()).unwrap();
        assert!(!format!("{set:?}").contains(A));
        let principals = [("ci".to_string(), Ok(TokenSet::single(B.into())))].into();
        let state = format!("{:?}", TokenState::Valid(TokenSets::new(set, principals)));
        assert!(!state.contains(A) && !state.contains(B), "{state}");
        let problem = TokenSet::parse(b"secretsecret").unwrap_err().to_string();
        assert!(!problem.contains("secret"), "{problem}");
    }

    #[test]
    fn an_invalid_state_accepts_nothing() {
        let state = TokenState::Invalid(TokenFileError::Empty);
        assert!(!state.accepts(A.as_bytes()));
        assert!(!state.accepts(b""));
    }

    #[tokio::test]
    async fn revoked_resolves_when_the_token_leaves_the_set() {
        let (publisher, tokens) = Tokens::new(owner_only(TokenSet::single(A.into())));
        let mut gone_a = Box::pin(tokens.revoked(A.into()));
        let mut gone_b = Box::pin(tokens.revoked(B.into()));
        let quick = std::time::Duration::from_millis(50);
        // B was never accepted: at once. A stays while it is in the set.
        tokio::time::timeout(quick, &mut gone_b).await.unwrap();
        let two = TokenSet::parse(format!("{B}\n{A}").as_bytes()).unwrap();
        publisher.publish(owner_only(two));
        assert!(tokio::time::timeout(quick, &mut gone_a).await.is_err());
        publisher.publish(owner_only(TokenSet::single(B.into())));
        tokio::time::timeout(quick, &mut gone_a).await.unwrap();
        // A failed-closed reload revokes everything.
        let mut gone_b = Box::pin(publisher.subscribe().revoked(B.into()));
        assert!(tokio::time::timeout(quick, &mut gone_b).await.is_err());
        publisher.publish(TokenState::Invalid(TokenFileError::Empty));
        tokio::time::timeout(quick, &mut gone_b).await.unwrap();
    }
}

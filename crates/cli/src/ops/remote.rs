//! Reaching a gateway (`--server`): the bearer token from `--token-file` or `SWITCHYARD_TOKEN`,
//! the client of `switchyard-client`, and its errors as the documented exit codes.

use std::path::Path;

use switchyard_client::{Client, Error};

use super::{Failure, NOT_FOUND, REFUSED};

/// The bearer secret: the first line of `--token-file`, else `SWITCHYARD_TOKEN`.
pub fn token(file: Option<&Path>) -> Result<Option<String>, Failure> {
    let secret = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                let code = if e.kind() == std::io::ErrorKind::NotFound {
                    NOT_FOUND
                } else {
                    1
                };
                Failure::exit(
                    code,
                    format!("cannot read the token file {}: {e}", path.display()),
                )
            })?;
            Some(text.lines().next().unwrap_or("").trim().to_string())
        }
        None => std::env::var("SWITCHYARD_TOKEN").ok(),
    };
    match secret {
        Some(s) if s.is_empty() => Err(Failure::exit(
            1,
            "the token is empty: put the secret `switchyard token new` printed in the token file \
             or SWITCHYARD_TOKEN",
        )),
        other => Ok(other),
    }
}

/// A client of the gateway at `server` (`http://` or `https://`), trusting the system's roots
/// plus `ca` (a PEM file) when given.
pub fn connect(server: &str, token: Option<String>, ca: Option<&Path>) -> Result<Client, Failure> {
    let base = server.trim_end_matches('/');
    // Checked here too, so the message names the option the operator set.
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(Failure::exit(
            1,
            format!("--server {server:?} must start with http:// or https://"),
        ));
    }
    let mut builder =
        Client::builder(base).user_agent(concat!("switchyard/", env!("CARGO_PKG_VERSION")));
    if let Some(secret) = token {
        builder = builder.token(secret);
    }
    if let Some(path) = ca {
        let pem = std::fs::read(path).map_err(|e| {
            Failure::exit(
                NOT_FOUND,
                format!("cannot read --server-ca {}: {e}", path.display()),
            )
        })?;
        builder = builder.ca_pem(pem);
    }
    builder.build().map_err(|e| match (e, ca) {
        (Error::Setup { reason }, Some(path)) => {
            Failure::exit(1, format!("--server-ca {}: {reason}", path.display()))
        }
        (e, _) => Failure::exit(1, e.to_string()),
    })
}

/// A refused request: 404 → [`NOT_FOUND`], 401 and 403 → [`REFUSED`] with where a token comes
/// from, else 1; the message is the gateway's, with its request id for its log.
impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        match e {
            Error::Unreachable { base, reason } => Failure::exit(
                1,
                format!(
                    "cannot reach the gateway at {base}: {reason}; is `switchyard serve` running \
                     there?"
                ),
            ),
            Error::Decode { reason } => Failure::exit(
                1,
                format!("the gateway answered something else than JSON: {reason}"),
            ),
            e if e.is_unauthorized() => Failure::exit(
                REFUSED,
                format!(
                    "{e}; pass a token of the gateway's token file with --token-file or \
                     SWITCHYARD_TOKEN"
                ),
            ),
            e if e.is_not_found() => Failure::exit(NOT_FOUND, e.to_string()),
            e => Failure::exit(1, e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16) -> Error {
        Error::Refused {
            status,
            error: Some("unknown_run".into()),
            message: Some("no such run".into()),
            request_id: Some("req-7".into()),
            retry_after: None,
            body: serde_json::Value::Null,
        }
    }

    fn exit(e: Error) -> (u8, String) {
        match Failure::from(e) {
            Failure::Exit { code, message } => (code, message),
            Failure::Core(e) => panic!("not an exit: {e}"),
        }
    }

    #[test]
    fn client_errors_keep_the_exit_codes_and_the_request_id() {
        let (code, message) = exit(refused(404));
        assert_eq!(code, NOT_FOUND);
        assert_eq!(
            message,
            "the gateway answered 404 Not Found unknown_run: no such run [request id req-7]"
        );
        for status in [401, 403] {
            let (code, message) = exit(refused(status));
            assert_eq!(code, REFUSED);
            assert!(message.contains("[request id req-7]"), "{message}");
            assert!(
                message.ends_with("--token-file or SWITCHYARD_TOKEN"),
                "{message}"
            );
        }
        assert_eq!(exit(refused(409)).0, 1);
        let (code, message) = exit(Error::Unreachable {
            base: "http://127.0.0.1:9".into(),
            reason: "connection refused".into(),
        });
        assert_eq!(code, 1);
        assert!(
            message.contains("is `switchyard serve` running there?"),
            "{message}"
        );
    }
}

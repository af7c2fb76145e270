//! Secrets and signatures of the Standard Webhooks scheme: a secret is `whsec_` and the
//! base64 of its key bytes; a message is signed with HMAC-SHA256 over
//! `"{webhook-id}.{webhook-timestamp}.{body}"` and sent as `v1,<base64>`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "whsec_";

/// The fewest and most key bytes a secret may carry: fewer is guessable, more buys nothing.
const MIN_KEY_BYTES: usize = 24;
const MAX_KEY_BYTES: usize = 64;

/// A fresh secret of 32 random bytes.
pub(crate) fn new_secret() -> String {
    let key: [u8; 32] = rand::random();
    format!("{PREFIX}{}", STANDARD.encode(key))
}

/// The key bytes of `secret`, or why it is not a usable secret.
pub(crate) fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret
        .strip_prefix(PREFIX)
        .ok_or_else(|| format!("must start with `{PREFIX}` followed by base64 key bytes"))?;
    let key = STANDARD
        .decode(encoded)
        .map_err(|e| format!("the part after `{PREFIX}` is not base64: {e}"))?;
    if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&key.len()) {
        return Err(format!(
            "must decode to {MIN_KEY_BYTES} to {MAX_KEY_BYTES} key bytes, got {}",
            key.len()
        ));
    }
    Ok(key)
}

/// The `webhook-signature` header value of one message.
pub(crate) fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The message id of one event for one subscription: the same on every retry and every
/// re-enqueue of the same event, so a receiver can drop a message it has already seen.
pub(crate) fn message_id(subscription: &str, event_key: &str) -> String {
    use sha2::Digest as _;
    let digest = Sha256::digest(format!("{subscription}\n{event_key}").as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("msg_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_example_signs_alike() {
        // The example of the Standard Webhooks reference libraries.
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("a valid secret");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_are_checked_and_fresh_ones_are_valid() {
        assert!(secret_key(&new_secret()).is_ok());
        assert!(secret_key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(secret_key("whsec_!!!").is_err());
        assert!(secret_key("whsec_c2hvcnQ=").is_err());
        assert_ne!(message_id("a", "e"), message_id("b", "e"));
        assert_eq!(message_id("a", "e"), message_id("a", "e"));
    }
}

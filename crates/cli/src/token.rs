//! `switchyard token new`: a fresh random secret, printed once, and the token-file entry that
//! holds only its SHA-256 (ADR 0180).

use std::process::ExitCode;

use clap::Args;
use rand::RngCore;
use switchyard_kit::core::{Error, Result};

use switchyard_gateway::auth::{Right, TokenSet, digest_hex};

/// Options of `switchyard token new`.
#[derive(Debug, Clone, Args)]
pub struct NewTokenArgs {
    /// The token's name, shown in logs and metrics.
    pub name: String,
    /// A namespace (glob) its runs and streams may be in; repeatable; `*` for all, `""` for the
    /// default namespace.
    #[arg(long = "namespace", value_name = "GLOB")]
    pub namespaces: Vec<String>,
    /// A queue (glob) it may use, with its dead letters and workers; repeatable.
    #[arg(long = "queue", value_name = "GLOB")]
    pub queues: Vec<String>,
    /// read, write or metrics; repeatable (default: read and write).
    #[arg(long = "right", value_name = "RIGHT")]
    pub rights: Vec<String>,
}

/// Prints the secret and the TOML entry.
pub fn new(args: NewTokenArgs) -> Result<ExitCode> {
    let rights = if args.rights.is_empty() {
        vec!["read".to_string(), "write".to_string()]
    } else {
        args.rights
    };
    if let Some(bad) = rights.iter().find(|r| Right::parse(r).is_none()) {
        return Err(Error::invalid(
            "--right",
            format!("{bad:?} is not read, write or metrics"),
        ));
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!("sy_{}", hex::encode(bytes));
    let entry = entry(
        &args.name,
        &digest_hex(&secret),
        &args.namespaces,
        &args.queues,
        &rights,
    )?;
    // The entry must load as the gateway will load it.
    TokenSet::parse(&entry, "the new entry")?;
    println!(
        "# secret of {:?} (shown once; clients send `Authorization: Bearer <secret>`):",
        args.name
    );
    println!("# {secret}");
    println!("# add this to the token file, then send the gateway SIGHUP:");
    print!("{entry}");
    Ok(ExitCode::SUCCESS)
}

fn entry(
    name: &str,
    sha256: &str,
    namespaces: &[String],
    queues: &[String],
    rights: &[String],
) -> Result<String> {
    let list = |items: &[String]| -> Result<String> {
        let quoted: Result<Vec<String>> = items.iter().map(|s| quote(s)).collect();
        Ok(format!("[{}]", quoted?.join(", ")))
    };
    Ok(format!(
        "[[tokens]]\nname = {}\nsha256 = \"{sha256}\"\nnamespaces = {}\nqueues = {}\nrights = {}\n",
        quote(name)?,
        list(namespaces)?,
        list(queues)?,
        list(rights)?,
    ))
}

/// A TOML basic string.
fn quote(s: &str) -> Result<String> {
    toml::Value::String(s.to_string())
        .to_string()
        .parse::<String>()
        .map_err(|e| Error::invalid("name", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_load_with_odd_names() {
        let e = entry(
            "a \"b\" \\ c",
            &digest_hex("s"),
            &["tenant-*".into(), String::new()],
            &["jobs".into()],
            &["read".into()],
        )
        .expect("entry");
        let set = TokenSet::parse(&e, "t").expect("loads");
        let t = set.find("s").expect("token");
        assert_eq!(t.name(), "a \"b\" \\ c");
        assert!(t.namespace_allowed("tenant-x") && t.namespace_allowed(""));
        assert!(t.queue_allowed("jobs") && !t.queue_allowed("mail"));
    }
}

//! Lua scripts of the Redis adapters (ADR 0171).
//!
//! Every script lives in a `.lua` file of its adapter, compiled in with `include_str!`, and opens
//! with a header of `--` comment lines that a reader needs before the code:
//!
//! ```lua
//! -- What the script does, in a sentence or more.
//! --
//! -- KEYS: 1 stream
//! -- ARGV: 1 maxlen  2 ttl seconds (0 = none)  3.. field/value pairs
//! -- Returns the new entry id.
//! ```
//!
//! [`check_header`] is the rule: within the leading comment block, one line starts with `KEYS`,
//! one with `ARGV` and one with `Returns` (after `-- `); a script without keys or arguments says
//! `KEYS: none`. A unit test holds every `.lua` file of the Redis crates to it.
//!
//! [`LuaScript::run`] sends `EVALSHA` and, on `NOSCRIPT` (a restart, `SCRIPT FLUSH`, or a
//! replica promoted by a failover), loads the script again (`SCRIPT LOAD` on every primary of a
//! cluster) and retries, at most three times in all.
//!
//! Scripts that share many helpers can instead be the functions of one [`LuaLibrary`] (Redis 7's
//! `FUNCTION LOAD`, ADR 0400): the helpers are defined once, when a server loads the library,
//! where a composed script defines every one of them again on each call. [`LuaScript::run`] then
//! sends `FCALL` and, when the server lacks the function (a restart without persistence,
//! `FUNCTION FLUSH`, a node new to a cluster), loads the library (on every primary of a cluster)
//! and retries, as for `NOSCRIPT`.

use fred::clients::Client;
use fred::error::Error as FredError;
use fred::prelude::{FromValue, FunctionInterface};
use fred::types::scripts::Script;
use fred::types::{MultipleKeys, MultipleValues};

use crate::error::{is_function_missing, is_noscript};

/// How many `EVALSHA`s (or `FCALL`s) one [`LuaScript::run`] sends at most.
const ATTEMPTS: u32 = 3;

/// A Lua script from a `.lua` file: its source and how it runs, as a script of its own
/// (`EVALSHA` by its SHA-1) or as a function of a [`LuaLibrary`] (`FCALL`).
#[derive(Debug, Clone)]
pub struct LuaScript {
    name: &'static str,
    source: &'static str,
    script: Script,
    function: Option<(&'static LuaLibrary, &'static str)>,
}

impl LuaScript {
    /// A script named `name` (its file name, for messages) with `source`
    /// (`include_str!("name.lua")`). The header is checked in debug builds.
    pub fn new(name: &'static str, source: &'static str) -> Self {
        debug_assert!(
            check_header(source).is_ok(),
            "{name}: {:?}",
            check_header(source)
        );
        Self {
            name,
            source,
            script: Script::from_lua(source),
            function: None,
        }
    }

    /// A script named `name` from the file `own` whose body uses the helpers of `parts` (files
    /// of local functions): `own`'s header first, so the header a reader, a server and
    /// [`check_header`] see is the script's own, then each part, then `own`'s body (ADR 0162).
    /// The source is built once per process by the adapter that holds the script, and lives as
    /// long as the process.
    pub fn composed(name: &'static str, own: &str, parts: &[&str]) -> Self {
        Self::new(name, Box::leak(compose(own, parts).into_boxed_str()))
    }

    /// The file name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source (for checks of its header, and for tools that show what runs).
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The SHA-1 `EVALSHA` names the script by.
    pub fn sha1(&self) -> &str {
        self.script.sha1()
    }

    /// `SCRIPT LOAD` on the server (on every primary of a cluster).
    pub async fn load(&self, client: &Client) -> Result<(), FredError> {
        self.script.load(client).await
    }

    /// `EVALSHA`, loading the script again on `NOSCRIPT`; or, for a function of a library,
    /// `FCALL`, loading the library again when the server lacks the function.
    pub async fn run<R, K, V>(&self, client: &Client, keys: K, args: V) -> Result<R, FredError>
    where
        R: FromValue,
        K: Into<MultipleKeys> + Send,
        V: TryInto<MultipleValues> + Send,
        V::Error: Into<FredError> + Send,
    {
        let keys: MultipleKeys = keys.into();
        let args: MultipleValues = args.try_into().map_err(Into::into)?;
        let mut attempt = 1;
        // Each fred future is boxed as it is made: it is several kilobytes, and held inline it
        // would be moved whole by every layer of the callers' futures (ADR 0403).
        if let Some((library, function)) = self.function {
            loop {
                match Box::pin(client.fcall(function, keys.clone(), args.clone())).await {
                    Err(e) if is_function_missing(&e) && attempt < ATTEMPTS => {
                        attempt += 1;
                        Box::pin(library.load(client)).await?;
                    }
                    result => return result,
                }
            }
        }
        loop {
            match Box::pin(self.script.evalsha(client, keys.clone(), args.clone())).await {
                Err(e) if is_noscript(&e) && attempt < ATTEMPTS => {
                    attempt += 1;
                    Box::pin(self.load(client)).await?;
                }
                result => return result,
            }
        }
    }
}

/// Lua functions loaded together (Redis 7's `FUNCTION LOAD`, ADR 0400): the helpers of `parts`
/// defined once, at load, and one function per script of the library, whose body is the
/// script's file after its header.
///
/// The library's name carries the SHA-1 of its source, and so does each function's name
/// (function names are global on a server): processes of different builds that share a server
/// each call their own functions. A library of an older build stays loaded until an operator
/// removes it (`FUNCTION DELETE`), which is harmless to the builds still running.
///
/// The source a server loads runs in Redis' loading sandbox: a part's top level may only define
/// locals from literals and functions (no call to `string`, `table` or `redis.call` there), and
/// whatever a call changes in the library's locals outlives the call, so the part that binds a
/// call's KEYS and ARGV (`bind`, which every function calls first) also resets each call's state.
#[derive(Debug)]
pub struct LuaLibrary {
    name: String,
    source: String,
    /// Per script: its file name, its file's source and its function's name.
    functions: Vec<(&'static str, &'static str, &'static str)>,
}

impl LuaLibrary {
    /// The library `kind` (a word: `fleet_queue`) of `scripts`, each `(file name, source)`, over
    /// the helpers of `parts`, in order. Each function starts with `bind(keys, args)`, which the
    /// parts must define.
    pub fn new(kind: &str, parts: &[&str], scripts: &[(&'static str, &'static str)]) -> Self {
        let mut body = String::new();
        for part in parts {
            body.push_str(part);
            body.push('\n');
        }
        let mut registered = Vec::with_capacity(scripts.len());
        for (name, own) in scripts {
            debug_assert!(check_header(own).is_ok(), "{name}: {:?}", check_header(own));
            let (_, own_body) = split_header(own);
            let stem = name.strip_suffix(".lua").unwrap_or(name);
            registered.push((*name, *own, stem, own_body));
        }
        // The hash names this exact source: the parts and every script, in order.
        let mut whole = body.clone();
        for (_, _, stem, own_body) in &registered {
            whole.push_str(stem);
            whole.push_str(own_body);
        }
        let hash = fred::util::sha1_hash(&whole);
        let name = format!("switchyard_{kind}_{}", &hash[..12]);
        let mut source = format!(
            "#!lua name={name}\n-- switchyard's {kind} library (ADR 0400): the helpers below are \
             defined once, when the server loads it.\n"
        );
        source.push_str(&body);
        let mut functions = Vec::with_capacity(registered.len());
        for (file, own, stem, own_body) in registered {
            let function: &'static str = Box::leak(format!("{name}_{stem}").into_boxed_str());
            source.push_str(&format!(
                "redis.register_function('{function}', function(keys, args)\nbind(keys, args)\n\
                 {own_body}\nend)\n"
            ));
            functions.push((file, own, function));
        }
        Self {
            name,
            source,
            functions,
        }
    }

    /// The library's name on the server.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The source `FUNCTION LOAD` sends.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The function made of the script of file `file`.
    pub fn function_of(&self, file: &str) -> Option<&'static str> {
        self.entry(file).map(|&(_, _, function)| function)
    }

    /// The file name, source and function name of the script of file `file`.
    fn entry(&self, file: &str) -> Option<&(&'static str, &'static str, &'static str)> {
        self.functions.iter().find(|(f, _, _)| *f == file)
    }

    /// The script of file `file` as this library's function: [`LuaScript::run`] calls it with
    /// `FCALL`. Panics when the library holds no such script, a mistake of the code that builds
    /// both, not of any input.
    pub fn script(&'static self, file: &str) -> LuaScript {
        let Some(&(name, own, function)) = self.entry(file) else {
            panic!("{file} is not a script of library {}", self.name)
        };
        LuaScript {
            function: Some((self, function)),
            ..LuaScript::new(name, own)
        }
    }

    /// `FUNCTION LOAD REPLACE` on the server (on every primary of a cluster). Replacing is safe:
    /// the name is the source's hash, so what it replaces is the same code.
    pub async fn load(&self, client: &Client) -> Result<(), FredError> {
        client
            .function_load_cluster::<fred::types::Value, _>(true, self.source.as_str())
            .await
            .map(|_| ())
    }
}

/// The parts of a script header that [`check_header`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The `KEYS` line (without `-- `).
    pub keys: String,
    /// The `ARGV` line.
    pub argv: String,
    /// The `Returns` line.
    pub returns: String,
}

/// Checks that `source` opens with the documented header (see the module docs).
pub fn check_header(source: &str) -> Result<Header, String> {
    let block: Vec<&str> = source
        .lines()
        .map(str::trim_start)
        .take_while(|line| line.starts_with("--"))
        .map(|line| line.trim_start_matches('-').trim())
        .collect();
    if block.is_empty() {
        return Err("the script does not open with a `--` comment header".into());
    }
    let find = |word: &str| {
        block
            .iter()
            .find(|line| {
                line.strip_prefix(word)
                    .is_some_and(|rest| rest.is_empty() || !rest.starts_with(char::is_alphanumeric))
            })
            .map(|line| line.to_string())
            .ok_or_else(|| format!("the header has no line starting with `{word}`"))
    };
    Ok(Header {
        keys: find("KEYS")?,
        argv: find("ARGV")?,
        returns: find("Returns")?,
    })
}

/// `own` split after its leading `--` comment block (the header), by the rule
/// [`check_header`] reads.
fn split_header(own: &str) -> (&str, &str) {
    let mut end = 0;
    for line in own.split_inclusive('\n') {
        if !line.trim_start().starts_with("--") {
            break;
        }
        end += line.len();
    }
    own.split_at(end)
}

/// The source of [`LuaScript::composed`].
fn compose(own: &str, parts: &[&str]) -> String {
    let (header, body) = split_header(own);
    let mut source =
        String::with_capacity(own.len() + parts.iter().map(|p| p.len() + 1).sum::<usize>());
    source.push_str(header);
    for part in parts {
        source.push_str(part);
        source.push('\n');
    }
    source.push_str(body);
    source
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    #[test]
    fn a_composed_script_opens_with_its_own_header_and_keeps_every_part() {
        let own =
            "-- A script.\n--\n-- KEYS: 1 k\n-- ARGV: none\n-- Returns 1.\nreturn f(KEYS[1])\n";
        let part_a = "local function f(k) return g(k) end";
        let part_b = "local function g(k) return 1 end";
        let (header, body) = split_header(own);
        assert!(header.contains("A script") && !body.trim_start().starts_with("--"));
        let source = compose(own, &[part_b, part_a]);
        assert_eq!(check_header(&source), check_header(own));
        assert!(source.starts_with(header) && source.ends_with(body));
        let b_at = source.find(part_b).expect("part b inside");
        let a_at = source.find(part_a).expect("part a inside");
        assert!(header.len() <= b_at && b_at < a_at);
        assert!(a_at + part_a.len() <= source.len() - body.len());
    }

    #[test]
    fn a_library_names_its_source_and_makes_a_function_of_each_script() {
        let part = "local KEYS, ARGV\nlocal function bind(k, a) KEYS, ARGV = k, a end";
        let one = "-- One.\n--\n-- KEYS: 1 k\n-- ARGV: none\n-- Returns 1.\nreturn 1\n";
        let two = "-- Two.\n--\n-- KEYS: 1 k\n-- ARGV: none\n-- Returns 2.\nreturn 2\n";
        let lib = LuaLibrary::new("demo", &[part], &[("one.lua", one), ("two.lua", two)]);
        assert!(lib.name().starts_with("switchyard_demo_"));
        assert!(
            lib.source()
                .starts_with(&format!("#!lua name={}\n", lib.name()))
        );
        let f1 = lib.function_of("one.lua").expect("one's function");
        assert_eq!(f1, format!("{}_one", lib.name()));
        assert!(lib.function_of("three.lua").is_none());
        // Each function binds its call, then runs its script's body without the header.
        let at = lib.source().find(&format!("'{f1}'")).expect("registered");
        let registered = &lib.source()[at..];
        assert!(registered.contains("bind(keys, args)\nreturn 1"));
        assert!(!lib.source().contains("-- One."));
        // Another source is another library: builds sharing a server keep their own functions.
        let other = LuaLibrary::new("demo", &[part], &[("one.lua", two), ("two.lua", two)]);
        assert_ne!(other.name(), lib.name());
        assert_ne!(other.function_of("one.lua"), Some(f1));
    }

    #[test]
    fn the_header_rule() {
        let good = "-- Does a thing.\n--\n-- KEYS: 1 a\n-- ARGV: none\n-- Returns 1.\nreturn 1\n";
        let header = check_header(good).expect("good header");
        assert_eq!(header.keys, "KEYS: 1 a");
        assert_eq!(header.returns, "Returns 1.");
        assert!(check_header("return 1").is_err());
        assert!(check_header("-- KEYS: 1 a\n-- Returns 1\nreturn 1").is_err());
        // The header is the leading comment block only.
        assert!(check_header("-- KEYS: a\n-- ARGV: b\nlocal x = 1\n-- Returns 1\n").is_err());
        // `KEYSPACE` is not `KEYS`.
        assert!(check_header("-- KEYSPACE\n-- ARGV: b\n-- Returns 1\n").is_err());
    }

    fn lua_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    lua_files(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "lua") {
                out.push(path);
            }
        }
    }

    /// Every `.lua` file of the workspace's Redis crates (the folders beside this one) carries
    /// the header.
    #[test]
    fn every_lua_file_of_the_redis_crates_has_the_header() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&crates)
            .expect("the crates folder")
            .flatten()
        {
            lua_files(&entry.path(), &mut files);
        }
        let names: Vec<String> = files
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        // The walk must find the scripts it is meant to check.
        for known in ["append.lua", "publish.lua", "snapshot.lua"] {
            assert!(
                names.iter().any(|n| n == known),
                "{known} not found in {names:?}"
            );
        }
        let mut bad = Vec::new();
        for file in &files {
            let source = std::fs::read_to_string(file).expect("readable script");
            if let Err(why) = check_header(&source) {
                bad.push(format!("{}: {why}", file.display()));
            }
        }
        assert!(
            bad.is_empty(),
            "scripts without the header:\n{}",
            bad.join("\n")
        );
    }
}

//! The objects Redisson hands out per entry of a map, a multimap or a set: `rlock entry-name`, and
//! `--entry CONTAINER:NAME --key KEY [--key-type T] [--codec C]`, which every command that takes a
//! NAME accepts in its place ([`Named`]).
//!
//! The name is Redisson's (docs/protocol.md §13): the container's name through `--name-prefix`,
//! the key as the codec encodes it, hashed, and the object's suffix; the command then works on that
//! name as on any other, mapping it once more as Java's object does.

use std::process::ExitCode;

use rlock_redisson::{Codec, Container, EntryKey, EntryNames, EntryObject};
use serde::Serialize;

use crate::kinds::{LockKindArg, Object};
use crate::target::Target;
use crate::{Result, output};

/// `rlock entry-name`: print the Redis name of an entry's object.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What holds the entry.
    #[arg(value_enum)]
    container: ContainerArg,
    /// The container's name (before --name-prefix).
    #[arg(value_parser = crate::non_empty_name)]
    name: String,
    /// The entry's key (a set's value), as --key-type reads it.
    #[arg(allow_hyphen_values = true)]
    key: String,
    #[command(flatten)]
    encoding: Encoding,
    /// Which of the entry's objects (rw, read and write all name its read-write lock).
    #[arg(long, value_enum, default_value_t)]
    kind: EntryKind,
}

/// `{"name": ...}`.
#[derive(Debug, Serialize)]
struct Report {
    name: String,
}

pub(crate) fn run(target: &Target, args: Args) -> Result<ExitCode> {
    let (codec, mapper) = target.naming()?;
    let names = EntryNames::new(args.container.into(), args.name, codec, mapper);
    let names = args.encoding.apply(names);
    let key = args.encoding.key(&args.key)?;
    let name = names.redis_name(key, args.kind.object())?;
    output::emit(&Report { name })?;
    Ok(ExitCode::SUCCESS)
}

/// How the key is given and encoded.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct Encoding {
    /// How KEY is read: the Java type the key is (a string, a Long, an Integer, a UUID), or hex,
    /// the bytes any codec wrote for it [default: string]
    #[arg(long, value_enum, value_name = "TYPE")]
    key_type: Option<KeyType>,
    /// The codec the Java side encodes keys with [default: the --redisson-config file's codec,
    /// else kryo5, Redisson's default]
    #[arg(long, value_enum, value_name = "CODEC")]
    codec: Option<CodecArg>,
}

impl Encoding {
    /// The key `text` as its type reads it.
    fn key(&self, text: &str) -> Result<EntryKey> {
        let bad =
            |e: &dyn std::fmt::Display| format!("--key {text:?} is not a {}: {e}", self.key_type());
        Ok(match self.key_type() {
            KeyType::String => EntryKey::from(text),
            KeyType::Long => EntryKey::Long(text.parse().map_err(|e| bad(&e))?),
            KeyType::Int => EntryKey::Integer(text.parse().map_err(|e| bad(&e))?),
            KeyType::Uuid => EntryKey::Uuid(text.parse().map_err(|e| bad(&e))?),
            KeyType::Hex => EntryKey::Encoded(hex::decode(text).map_err(|e| bad(&e))?),
        })
    }

    fn key_type(&self) -> KeyType {
        self.key_type.unwrap_or_default()
    }

    /// `names` with `--codec`, if given.
    fn apply(&self, names: EntryNames) -> EntryNames {
        match self.codec {
            Some(codec) => names.with_codec(codec.into()),
            None => names,
        }
    }
}

/// `--entry CONTAINER:NAME --key KEY`: the entry whose object a command works on.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EntryArgs {
    /// Work on an object of this map's, multimap's or set's entry instead of NAME (with --key):
    /// map:orders is Java's redisson.getMap("orders")
    #[arg(long, value_name = "CONTAINER:NAME", value_parser = parse_entry, requires = "key")]
    entry: Option<(ContainerArg, String)>,
    /// The entry's key (a set's value), with --entry
    #[arg(
        long,
        value_name = "KEY",
        requires = "entry",
        allow_hyphen_values = true
    )]
    key: Option<String>,
    #[command(flatten)]
    encoding: Encoding,
}

/// `map:orders` → (map, `orders`).
fn parse_entry(text: &str) -> Result<(ContainerArg, String), String> {
    use clap::ValueEnum as _;
    let (container, name) = text
        .split_once(':')
        .ok_or("expected CONTAINER:NAME, e.g. map:orders")?;
    let container = ContainerArg::from_str(container, false)
        .map_err(|_| format!("{container:?} is not map, multimap or set"))?;
    Ok((container, crate::non_empty_name(name)?))
}

impl EntryArgs {
    /// Whether `--entry` was given.
    pub(crate) fn is_given(&self) -> bool {
        self.entry.is_some()
    }

    /// The name of the entry's `object`, for the factories of a client of `config` (which map it).
    pub(crate) fn name(
        &self,
        config: &rlock_redisson::Config,
        object: EntryObject,
    ) -> Result<Option<String>> {
        let (Some((container, name)), Some(key)) = (&self.entry, &self.key) else {
            return Ok(None);
        };
        let names = EntryNames::new(
            (*container).into(),
            name.as_str(),
            config.codec.clone(),
            config.name_mapper.clone(),
        );
        let key = self.encoding.key(key)?;
        Ok(Some(self.encoding.apply(names).name(key, object)?))
    }
}

/// NAME, or `--entry CONTAINER:NAME --key KEY` in its place.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Named {
    /// The name (or --entry CONTAINER:NAME --key KEY for an entry's object).
    #[arg(value_parser = crate::non_empty_name, required_unless_present = "entry",
          conflicts_with = "entry")]
    name: Option<String>,
    #[command(flatten)]
    entry: EntryArgs,
}

impl Named {
    /// The name to hand the factories of a client of `config`: NAME, or the entry's `object`'s.
    /// Called before connecting, so that a refused `--entry` sends nothing.
    pub(crate) fn resolve(
        &self,
        config: &rlock_redisson::Config,
        object: EntryObject,
    ) -> Result<String> {
        match (&self.name, self.entry.name(config, object)?) {
            (Some(name), _) => Ok(name.clone()),
            (None, Some(name)) => Ok(name),
            (None, None) => Err("give NAME or --entry CONTAINER:NAME --key KEY".into()),
        }
    }

    /// [`Named::resolve`] for a lock of `kind`: refused with `--entry` for the kinds Java hands out
    /// by name only.
    pub(crate) fn resolve_lock(
        &self,
        config: &rlock_redisson::Config,
        kind: LockKindArg,
    ) -> Result<String> {
        match (kind.entry_object(), self.entry.is_given()) {
            (Some(object), _) => self.resolve(config, object),
            (None, false) => self.resolve(config, EntryObject::Lock),
            (None, true) => Err(format!(
                "--kind {} has no entry form in Redisson (maps, multimaps and sets hand out \
                 lock, fair, read, write, semaphore, expirable-semaphore and latch objects)",
                kind.as_arg()
            )
            .into()),
        }
    }

    /// [`Named::resolve`] for `inspect --kind`.
    pub(crate) fn resolve_object(
        &self,
        config: &rlock_redisson::Config,
        object: Object,
    ) -> Result<String> {
        match object {
            Object::Lock(kind) => self.resolve_lock(config, kind),
            Object::Semaphore => self.resolve(config, EntryObject::Semaphore),
            Object::ExpirableSemaphore => {
                self.resolve(config, EntryObject::PermitExpirableSemaphore)
            }
            Object::Latch => self.resolve(config, EntryObject::CountDownLatch),
        }
    }
}

/// What holds an entry, on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ContainerArg {
    /// RMap, RMapCache, RLocalCachedMap.
    Map,
    /// RListMultimap, RSetMultimap.
    Multimap,
    /// RSet, RSetCache.
    Set,
}

impl From<ContainerArg> for Container {
    fn from(arg: ContainerArg) -> Self {
        match arg {
            ContainerArg::Map => Self::Map,
            ContainerArg::Multimap => Self::Multimap,
            ContainerArg::Set => Self::Set,
        }
    }
}

/// How KEY is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum KeyType {
    /// A java.lang.String.
    #[default]
    String,
    /// A java.lang.Long.
    Long,
    /// A java.lang.Integer.
    Int,
    /// A java.util.UUID.
    Uuid,
    /// The bytes a codec wrote, in hex (any codec, e.g. one rlock does not reproduce).
    Hex,
}

impl std::fmt::Display for KeyType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum as _;
        let value = self.to_possible_value().ok_or(std::fmt::Error)?;
        f.write_str(value.get_name())
    }
}

/// The codec, on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CodecArg {
    /// org.redisson.codec.Kryo5Codec, Redisson's default.
    Kryo5,
    /// org.redisson.client.codec.StringCodec.
    String,
    /// org.redisson.client.codec.LongCodec.
    Long,
    /// org.redisson.client.codec.IntegerCodec.
    Int,
    /// org.redisson.codec.JsonJacksonCodec.
    Json,
    /// org.redisson.codec.TypedJsonJacksonCodec.
    TypedJson,
}

impl From<CodecArg> for Codec {
    fn from(arg: CodecArg) -> Self {
        match arg {
            CodecArg::Kryo5 => Self::Kryo5,
            CodecArg::String => Self::String,
            CodecArg::Long => Self::Long,
            CodecArg::Int => Self::Integer,
            CodecArg::Json => Self::JsonJackson,
            CodecArg::TypedJson => Self::TypedJsonJackson,
        }
    }
}

/// `entry-name --kind`: which of an entry's objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EntryKind {
    /// getLock(key).
    #[default]
    Lock,
    /// getFairLock(key).
    Fair,
    /// getReadWriteLock(key).
    Rw,
    /// getReadWriteLock(key) (its read lock shares the name).
    Read,
    /// getReadWriteLock(key) (its write lock shares the name).
    Write,
    /// getSemaphore(key).
    Semaphore,
    /// getPermitExpirableSemaphore(key).
    ExpirableSemaphore,
    /// getCountDownLatch(key).
    Latch,
}

impl EntryKind {
    pub(crate) fn object(self) -> EntryObject {
        match self {
            Self::Lock => EntryObject::Lock,
            Self::Fair => EntryObject::FairLock,
            Self::Rw | Self::Read | Self::Write => EntryObject::ReadWriteLock,
            Self::Semaphore => EntryObject::Semaphore,
            Self::ExpirableSemaphore => EntryObject::PermitExpirableSemaphore,
            Self::Latch => EntryObject::CountDownLatch,
        }
    }
}

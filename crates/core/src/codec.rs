//! Redisson's codecs, as far as names need them: the bytes a Java codec writes for a map's key, a
//! set's value or a group lock's value, and the hash of those bytes that names the entry's lock
//! (docs/protocol.md §13).
//!
//! Redisson names the lock of a map entry after the entry's key *as the map's codec encodes it*
//! (`getLockByMapKey`), and a group lock's fields after its values as the client's codec encodes
//! them: the name depends on every byte, so each codec here writes exactly what its Java class
//! writes for the key types people use as map keys (strings, `int`s, `long`s, UUIDs). What Java
//! writes for other objects (a record, a list) depends on the class, its fields and the codec's
//! settings: such a key is given as the bytes the codec wrote ([`EntryKey::Encoded`]), which every
//! codec takes as they are.
//!
//! | codec | `"a"` | `42i32` | `42i64` | a UUID |
//! |---|---|---|---|---|
//! | `Kryo5Codec` (Redisson's default) | class 1, ASCII | class 0, zig-zag var-int | class 7, zig-zag var-long | class by name, two little-endian longs |
//! | `StringCodec`, `LongCodec`, `IntegerCodec` | `toString()` in UTF-8 | `42` | `42` | its 36 characters |
//! | `JsonJacksonCodec` | `"a"` | `42` | `["java.lang.Long",42]` | `["java.util.UUID","…"]` |
//! | `TypedJsonJacksonCodec` | `"a"` | `42` | `42` | `"…"` |
//!
//! The derivations, from Kryo 5.6.2's and Redisson 4.7.0's sources, are in docs/protocol.md §13.2.

use std::fmt;

use base64::Engine as _;
use highway::{HighwayHash as _, HighwayHasher};
use uuid::Uuid;

use crate::error::{Error, Result};

/// How Java turned the objects that name Redis keys into bytes: the `codec` of Redisson's config
/// (or of the map or set at hand).
///
/// The default is Redisson's, `Kryo5Codec`. [`Config::codec`](crate::Config::codec) is the client's;
/// a Redisson YAML file's `codec` sets it ([`Codec::from_java_class`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Codec {
    /// `org.redisson.codec.Kryo5Codec` with its default settings (Redisson's default codec): no
    /// registration required, no references.
    #[default]
    Kryo5,
    /// `org.redisson.client.codec.StringCodec` (UTF-8): the key's `toString()`.
    String,
    /// `org.redisson.client.codec.LongCodec`: encodes as [`Codec::String`] does.
    Long,
    /// `org.redisson.client.codec.IntegerCodec`: encodes as [`Codec::String`] does.
    Integer,
    /// `org.redisson.codec.JsonJacksonCodec`: JSON with Redisson's type information (a `Long` and a
    /// `UUID` are written with their class name).
    JsonJackson,
    /// `org.redisson.codec.TypedJsonJacksonCodec`: plain JSON.
    TypedJsonJackson,
    /// Any other codec, by its Java class name: only keys given as the bytes it wrote
    /// ([`EntryKey::Encoded`]) can be named under it.
    Other(String),
}

impl Codec {
    /// The codec a Java class name stands for (`org.redisson.codec.Kryo5Codec`, ...); a class rlock
    /// cannot reproduce is [`Codec::Other`].
    pub fn from_java_class(class: &str) -> Self {
        match class {
            "org.redisson.codec.Kryo5Codec" => Self::Kryo5,
            "org.redisson.client.codec.StringCodec" => Self::String,
            "org.redisson.client.codec.LongCodec" => Self::Long,
            "org.redisson.client.codec.IntegerCodec" => Self::Integer,
            "org.redisson.codec.JsonJacksonCodec" => Self::JsonJackson,
            "org.redisson.codec.TypedJsonJacksonCodec" => Self::TypedJsonJackson,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The Java class this codec is.
    pub fn java_class(&self) -> &str {
        match self {
            Self::Kryo5 => "org.redisson.codec.Kryo5Codec",
            Self::String => "org.redisson.client.codec.StringCodec",
            Self::Long => "org.redisson.client.codec.LongCodec",
            Self::Integer => "org.redisson.client.codec.IntegerCodec",
            Self::JsonJackson => "org.redisson.codec.JsonJacksonCodec",
            Self::TypedJsonJackson => "org.redisson.codec.TypedJsonJacksonCodec",
            Self::Other(class) => class,
        }
    }

    /// The bytes this codec writes for `key`: its value encoder, which is also its map-key encoder
    /// (each codec here uses one encoder for both).
    ///
    /// # Errors
    ///
    /// [`Error::Codec`] when the codec is [`Codec::Other`] and the key is not
    /// [`EntryKey::Encoded`]: rlock cannot know what that codec writes.
    pub fn encode(&self, key: &EntryKey) -> Result<Vec<u8>> {
        Ok(match (self, key) {
            (_, EntryKey::Encoded(bytes)) => bytes.clone(),
            (Self::Kryo5, key) => kryo5::encode(key),
            (Self::String | Self::Long | Self::Integer, key) => key.to_java_string().into_bytes(),
            (Self::JsonJackson, key) => json::encode(key, json::Typing::Redisson),
            (Self::TypedJsonJackson, key) => json::encode(key, json::Typing::None),
            (Self::Other(class), key) => {
                return Err(Error::Codec {
                    codec: class.clone(),
                    reason: format!(
                        "rlock cannot reproduce what {class} writes for the {} {key}: give the \
                         key as the bytes it writes (EntryKey::Encoded)",
                        key.java_type()
                    ),
                });
            }
        })
    }

    /// The name Redisson gives an entry's hash: `Hash.hash128toBase64` of the encoded key.
    pub(crate) fn hash(&self, key: &EntryKey) -> Result<String> {
        Ok(hash128_base64(&self.encode(key)?))
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.java_class())
    }
}

/// The key of a map entry, the value of a set, or a value of a group lock: the Java object whose
/// encoding names a lock.
///
/// Rust's `&str`/`String`, `i64`, `i32` and [`Uuid`] convert into the Java `String`, `Long`,
/// `Integer` and `UUID` a Java service would pass (`map.getLock(42L)` is `42i64`, `map.getLock(42)`
/// is `42i32`: Java tells them apart, so does the name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryKey {
    /// A `java.lang.String`.
    String(String),
    /// A `java.lang.Long`.
    Long(i64),
    /// A `java.lang.Integer`.
    Integer(i32),
    /// A `java.util.UUID`.
    Uuid(Uuid),
    /// The bytes a codec wrote for the key, used as they are whatever the codec: for a key type or
    /// a codec rlock does not reproduce.
    Encoded(Vec<u8>),
}

impl EntryKey {
    /// What Java's `toString()` returns, which the string codecs write (an encoded key's bytes
    /// read as UTF-8, for completeness: [`Codec::encode`] uses those bytes as they are).
    fn to_java_string(&self) -> String {
        match self {
            Self::String(s) => s.clone(),
            Self::Long(n) => n.to_string(),
            Self::Integer(n) => n.to_string(),
            Self::Uuid(uuid) => uuid.hyphenated().to_string(),
            Self::Encoded(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        }
    }

    /// The Java type, for errors.
    fn java_type(&self) -> &'static str {
        match self {
            Self::String(_) => "String",
            Self::Long(_) => "Long",
            Self::Integer(_) => "Integer",
            Self::Uuid(_) => "UUID",
            Self::Encoded(_) => "encoded key",
        }
    }
}

impl fmt::Display for EntryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::String(s) => write!(f, "{s:?}"),
            Self::Long(n) => write!(f, "{n}L"),
            Self::Integer(n) => write!(f, "{n}"),
            Self::Uuid(uuid) => write!(f, "{uuid}"),
            Self::Encoded(bytes) => write!(f, "<{} encoded bytes>", bytes.len()),
        }
    }
}

impl From<&str> for EntryKey {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for EntryKey {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

impl From<&String> for EntryKey {
    fn from(s: &String) -> Self {
        Self::String(s.clone())
    }
}

impl From<i64> for EntryKey {
    fn from(n: i64) -> Self {
        Self::Long(n)
    }
}

impl From<i32> for EntryKey {
    fn from(n: i32) -> Self {
        Self::Integer(n)
    }
}

impl From<Uuid> for EntryKey {
    fn from(uuid: Uuid) -> Self {
        Self::Uuid(uuid)
    }
}

impl From<&EntryKey> for EntryKey {
    fn from(key: &EntryKey) -> Self {
        key.clone()
    }
}

/// Redisson's `Hash.hash128toBase64`: HighwayHash-128 of `bytes` under Redisson's key, its two
/// 64-bit halves big-endian, in standard Base64 without the trailing `==` (22 characters).
pub(crate) fn hash128_base64(bytes: &[u8]) -> String {
    /// `org.redisson.misc.Hash.KEY`.
    const KEY: highway::Key = highway::Key([
        0x9e37_79b9_7f4a_7c15,
        0xf39c_c060_5ced_c834,
        0x1082_276b_f3a2_7251,
        0xf86c_6a11_d0c1_8e95,
    ]);
    let [high, low] = HighwayHasher::new(KEY).hash128(bytes);
    let mut halves = [0; 16];
    halves[..8].copy_from_slice(&high.to_be_bytes());
    halves[8..].copy_from_slice(&low.to_be_bytes());
    let mut encoded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(halves);
    // 16 bytes are 22 Base64 characters and `==`; Redisson drops the padding the same way.
    encoded.truncate(22);
    encoded
}

/// What `Kryo.writeClassAndObject` writes under Redisson's `Kryo5Codec` (Kryo 5.6.2).
mod kryo5 {
    use super::EntryKey;

    /// The class ids Kryo registers in its constructor (a wrapper shares its primitive's), written
    /// as `id + 2`: 0 is null, 1 is a class given by name.
    const INTEGER: u8 = 2;
    const STRING: u8 = 3;
    const LONG: u8 = 9;
    /// An unregistered class (Redisson requires no registration): `NAME + 2`, then the name's id in
    /// this object graph (the first, 0), then the name.
    const BY_NAME: [u8; 2] = [1, 0];

    pub(super) fn encode(key: &EntryKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        match key {
            EntryKey::Integer(n) => {
                out.push(INTEGER);
                var_long(&mut out, zigzag(i64::from(*n)), 5);
            }
            EntryKey::Long(n) => {
                out.push(LONG);
                var_long(&mut out, zigzag(*n), 9);
            }
            EntryKey::String(s) => {
                out.push(STRING);
                string(&mut out, s);
            }
            EntryKey::Uuid(uuid) => {
                out.extend_from_slice(&BY_NAME);
                ascii(&mut out, "java.util.UUID");
                // `UUIDSerializer`: the two halves with `writeLong`, which is little-endian.
                let (most, least) = uuid.as_u64_pair();
                out.extend_from_slice(&most.to_le_bytes());
                out.extend_from_slice(&least.to_le_bytes());
            }
            EntryKey::Encoded(bytes) => out.extend_from_slice(bytes),
        }
        out
    }

    /// `IntSerializer` and `LongSerializer` write with `optimizePositive = false`.
    fn zigzag(n: i64) -> u64 {
        ((n << 1) ^ (n >> 63)) as u64
    }

    /// `Output.writeVarInt`/`writeVarLong`: seven bits a byte, low first, the high bit saying
    /// more follow; the last of `max` bytes (5 for an int, 9 for a long) carries all its bits.
    /// An `int`'s zig-zag value fits 32 bits, so its fifth byte holds the last four.
    fn var_long(out: &mut Vec<u8>, mut value: u64, max: usize) {
        for _ in 1..max {
            if value >> 7 == 0 {
                break;
            }
            out.push((value & 0x7f) as u8 | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    /// `Output.writeString`.
    fn string(out: &mut Vec<u8>, s: &str) {
        let chars: Vec<u16> = s.encode_utf16().collect();
        if chars.is_empty() {
            // Length + 1 = 1, with the "not ASCII" flag.
            out.push(0x81);
        } else if (2..=32).contains(&chars.len()) && s.is_ascii() {
            // Short ASCII: the characters, the last one flagged.
            ascii(out, s);
        } else {
            var_int_flagged(out, chars.len() as u32 + 1);
            // Each UTF-16 unit alone, in one to three bytes (a surrogate is three bytes of its own,
            // as `writeUtf8_slow` does, not UTF-8's four for the pair).
            for c in chars {
                let c = u32::from(c);
                if c <= 0x7f {
                    out.push(c as u8);
                } else if c > 0x7ff {
                    out.extend_from_slice(&[
                        0xe0 | (c >> 12 & 0x0f) as u8,
                        0x80 | (c >> 6 & 0x3f) as u8,
                        0x80 | (c & 0x3f) as u8,
                    ]);
                } else {
                    out.extend_from_slice(&[0xc0 | (c >> 6 & 0x1f) as u8, 0x80 | (c & 0x3f) as u8]);
                }
            }
        }
    }

    /// `Output.writeAscii` of a name of two or more characters: the bytes, the last with its high
    /// bit set.
    fn ascii(out: &mut Vec<u8>, s: &str) {
        let start = out.len();
        out.extend_from_slice(s.as_bytes());
        if let Some(last) = out.get_mut(start + s.len().saturating_sub(1)) {
            *last |= 0x80;
        }
    }

    /// `Output.writeVarIntFlag(true, value, true)`: six bits and the flag in the first byte (bit 7
    /// says more follow), then seven bits a byte as [`var_long`].
    fn var_int_flagged(out: &mut Vec<u8>, value: u32) {
        let first = (value & 0x3f) as u8 | 0x80;
        if value >> 6 == 0 {
            out.push(first);
        } else {
            out.push(first | 0x40);
            var_long(out, u64::from(value >> 6), 4);
        }
    }
}

/// What Jackson writes for the key under Redisson's JSON codecs.
mod json {
    use super::EntryKey;

    pub(super) enum Typing {
        /// `JsonJacksonCodec`: default typing for non-final classes, and for `Long` on purpose; a
        /// mix-in gives `UUID` its class too. A scalar with type information is written as
        /// `["<class>", value]` (Jackson's wrapper array: a scalar has no object to hold a
        /// property).
        Redisson,
        /// `TypedJsonJacksonCodec`: no type information.
        None,
    }

    pub(super) fn encode(key: &EntryKey, typing: Typing) -> Vec<u8> {
        let typed = matches!(typing, Typing::Redisson);
        let json = match key {
            EntryKey::String(s) => string(s),
            EntryKey::Integer(n) => n.to_string(),
            EntryKey::Long(n) if typed => format!("[\"java.lang.Long\",{n}]"),
            EntryKey::Long(n) => n.to_string(),
            EntryKey::Uuid(uuid) if typed => format!("[\"java.util.UUID\",\"{uuid}\"]"),
            EntryKey::Uuid(uuid) => format!("\"{uuid}\""),
            EntryKey::Encoded(bytes) => return bytes.clone(),
        };
        json.into_bytes()
    }

    /// A JSON string as Jackson's generator writes it by default: UTF-8, `"` and `\` escaped, the
    /// control characters as `\b \t \n \f \r` or `\u00XX` (upper-case hex), nothing else escaped.
    fn string(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\u{c}' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04X}", u32::from(c))),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

#[cfg(test)]
mod tests;

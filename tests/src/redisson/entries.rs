//! The objects Redisson hands out per entry of a map, a multimap or a set (docs/protocol.md §13):
//! `map.getLock(key)` is an `RLock` named `suffixName(<map's mapped name>,
//! hash128toBase64(<encoded key>) + ":lock")`, and so on for `getFairLock` (`fairlock`),
//! `getReadWriteLock` (`rw_lock`), `getSemaphore` (`semaphore`), `getPermitExpirableSemaphore`
//! (`permitexpirablesemaphore`) and `getCountDownLatch` (`countdownlatch`). The emulator names
//! them from the bytes Java's codec wrote ([`JAVA_KEYS`], written on the JVM), never from rlock's
//! codecs, and its objects of those names are the kinds' usual ones.

use base64::Engine as _;
use highway::{HighwayHash as _, HighwayHasher};

use super::suffix_name;

/// A key as a Java codec wrote it, on the JVM: Kryo 5.6.2's own `Output` for `Kryo5Codec` (the
/// class id, then the value), `String.getBytes(UTF_8)` of `toString()` for `StringCodec` (which
/// `LongCodec` and `IntegerCodec` share), Jackson's JSON for the JSON codecs (docs/protocol.md
/// §13.2), and Redisson's own `HighwayHash` for the hash.
#[derive(Clone, Copy, Debug)]
pub struct JavaKey {
    /// The codec's simple class name.
    pub codec: &'static str,
    /// The Java object: `<type>:<toString()>`.
    pub key: &'static str,
    /// The bytes, in hex.
    pub encoded: &'static str,
    /// `Hash.hash128toBase64` of them, as Redisson computed it.
    pub hash: &'static str,
}

impl JavaKey {
    /// The encoded bytes.
    pub fn bytes(&self) -> Vec<u8> {
        (0..self.encoded.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&self.encoded[i..i + 2], 16).expect("hex"))
            .collect()
    }
}

/// Keys of every codec and key type rlock reproduces, as Java wrote them.
pub const JAVA_KEYS: &[JavaKey] = &[
    JavaKey {
        codec: "Kryo5Codec",
        key: "String:",
        encoded: "0381",
        hash: "8kZ0F42HzoQfW3jDxQ6f4g",
    },
    JavaKey {
        codec: "StringCodec",
        key: "String:",
        encoded: "",
        hash: "t6rZwibGo2uy1OSmNVe8pg",
    },
    JavaKey {
        codec: "Kryo5Codec",
        key: "String:orders",
        encoded: "036f72646572f3",
        hash: "C0xoxP9hLjXvqHeh/EoBFA",
    },
    JavaKey {
        codec: "StringCodec",
        key: "String:orders",
        encoded: "6f7264657273",
        hash: "fkpb4qUHoaX1lP+lHM7glg",
    },
    JavaKey {
        codec: "Kryo5Codec",
        key: "String:héllo",
        encoded: "038668c3a96c6c6f",
        hash: "HQvB+8Qy7DfRFKzQpsKmrA",
    },
    JavaKey {
        codec: "StringCodec",
        key: "String:héllo",
        encoded: "68c3a96c6c6f",
        hash: "C21sdzlNA76/qU3dH4L30Q",
    },
    JavaKey {
        codec: "Kryo5Codec",
        key: "String:🦀",
        encoded: "0383eda0beedb680",
        hash: "T2cPdB8Xsjb+CZPlRo0ezA",
    },
    JavaKey {
        codec: "StringCodec",
        key: "String:🦀",
        encoded: "f09fa680",
        hash: "hZ/+1N/uTKhpek5etqzSag",
    },
    JavaKey {
        codec: "Kryo5Codec",
        key: "Integer:42",
        encoded: "0254",
        hash: "Y5MJ+mge9H+XMmohFCsrTg",
    },
    JavaKey {
        codec: "StringCodec",
        key: "Integer:42",
        encoded: "3432",
        hash: "RE0IojEvPTY8Dofe3IkBNA",
    },
    JavaKey {
        codec: "Kryo5Codec",
        key: "Integer:-1",
        encoded: "0201",
        hash: "qsKacN1I9GWtvTr65GdF+A",
    },
    JavaKey {
        codec: "StringCodec",
        key: "Integer:-1",
        encoded: "2d31",
        hash: "Erwt0d03qvNX2RVaoeFZSw",
    },
    JavaKey {
        codec: "Kryo5Codec",
        key: "Long:42",
        encoded: "0954",
        hash: "VQXPsX8R0Nuk4PCULzvfjg",
    },
    JavaKey {
        codec: "StringCodec",
        key: "Long:42",
        encoded: "3432",
        hash: "RE0IojEvPTY8Dofe3IkBNA",
    },
    JavaKey {
        codec: "Kryo5Codec",
        key: "Long:-9223372036854775808",
        encoded: "09ffffffffffffffffff",
        hash: "8wAGzfg3roSo3NdLNkzw7w",
    },
    JavaKey {
        codec: "StringCodec",
        key: "Long:-9223372036854775808",
        encoded: "2d39323233333732303336383534373735383038",
        hash: "76gtm/GfSHe7ceJQSrYhhw",
    },
    JavaKey {
        codec: "Kryo5Codec",
        key: "UUID:1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed",
        encoded: "01006a6176612e7574696c2e555549c42d4bfdbbcd6b9d1bed4bbdfb8dab5d9b",
        hash: "VS9LcfZgC20suZo2gYj2zQ",
    },
    JavaKey {
        codec: "StringCodec",
        key: "UUID:1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed",
        encoded: "31623964366263642d626266642d346232642d396235642d616238646662626434626564",
        hash: "Fe8f/lt+AUzaof9Hbl4xtw",
    },
    JavaKey {
        codec: "JsonJacksonCodec",
        key: "String:orders",
        encoded: "226f726465727322",
        hash: "kJYNoec82SpeS6V2nPgVDQ",
    },
    JavaKey {
        codec: "JsonJacksonCodec",
        key: "Long:42",
        encoded: "5b226a6176612e6c616e672e4c6f6e67222c34325d",
        hash: "WwNbBTVB1zGkaLw39wufaA",
    },
    JavaKey {
        codec: "JsonJacksonCodec",
        key: "UUID:1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed",
        encoded: "5b226a6176612e7574696c2e55554944222c2231623964366263642d626266642d346232642d396235642d616238646662626434626564225d",
        hash: "DloBjnAfWlk2eaMXBAYxGg",
    },
    JavaKey {
        codec: "TypedJsonJacksonCodec",
        key: "UUID:1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed",
        encoded: "2231623964366263642d626266642d346232642d396235642d61623864666262643462656422",
        hash: "mICbI9xNLjqZEwL26tC2iQ",
    },
];

/// Redisson's `Hash.hash128toBase64` (§13.1): HighwayHash-128 under Redisson's key, the two longs
/// big-endian, standard Base64 without the trailing `==`.
pub fn hash128_to_base64(bytes: &[u8]) -> String {
    let key = highway::Key([
        0x9e37_79b9_7f4a_7c15,
        0xf39c_c060_5ced_c834,
        0x1082_276b_f3a2_7251,
        0xf86c_6a11_d0c1_8e95,
    ]);
    let [high, low] = HighwayHasher::new(key).hash128(bytes);
    let mut longs = high.to_be_bytes().to_vec();
    longs.extend_from_slice(&low.to_be_bytes());
    let encoded = base64::engine::general_purpose::STANDARD.encode(longs);
    encoded[..encoded.len() - 2].to_owned()
}

/// What holds entries: Java's map, multimap or set named `raw_name` (its name through the client's
/// `NameMapper`, `getRawName()`). The three name their entries' objects alike (§13.1); get an
/// entry's object with the kind's `JavaClient::get_*` and [`JavaEntries::object_name`].
#[derive(Clone, Debug)]
pub struct JavaEntries {
    raw_name: String,
}

impl JavaEntries {
    /// The entries of the map, multimap or set whose mapped name is `raw_name`.
    pub fn new(raw_name: &str) -> Self {
        Self {
            raw_name: raw_name.to_owned(),
        }
    }

    /// The name `getLockByMapKey(key, suffix)` (a set's `getLockByValue`) gives the object of the
    /// entry whose key the codec wrote as `encoded`, before the object's own mapping.
    pub fn object_name(&self, encoded: &[u8], suffix: &str) -> String {
        suffix_name(
            &self.raw_name,
            &format!("{}:{suffix}", hash128_to_base64(encoded)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_the_one_redisson_computed_on_the_jvm() {
        for key in JAVA_KEYS {
            assert_eq!(hash128_to_base64(&key.bytes()), key.hash, "{key:?}");
        }
    }
}

//! Golden encodings and names. The Kryo 5 bytes were written by Kryo 5.6.2's own `Output` (the
//! class ids composed as `Kryo.writeClassAndObject` writes them) and every hash by Redisson 4.7.0's
//! own `HighwayHash`, run on the JVM (docs/protocol.md §13.2 says how); the JSON forms follow
//! Jackson's rules as that section derives them.

use uuid::Uuid;

use super::{Codec, EntryKey, hash128_base64};
use crate::error::Error;

fn uuid(s: &str) -> Uuid {
    Uuid::parse_str(s).expect("a UUID literal")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// (codec, key, the bytes Java writes in hex, `Hash.hash128toBase64` of them).
fn java_goldens() -> Vec<(Codec, EntryKey, &'static str, &'static str)> {
    vec![
        (
            Codec::Kryo5,
            EntryKey::from(""),
            "0381",
            "8kZ0F42HzoQfW3jDxQ6f4g",
        ),
        (
            Codec::String,
            EntryKey::from(""),
            "",
            "t6rZwibGo2uy1OSmNVe8pg",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("a"),
            "038261",
            "Jon6GCcO+0QSJkhre5wXYA",
        ),
        (
            Codec::String,
            EntryKey::from("a"),
            "61",
            "qwvAS12pR0CgRitaypEjUw",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("ab"),
            "0361e2",
            "iFSOY3KcP2BLEBRRjSOm8w",
        ),
        (
            Codec::String,
            EntryKey::from("ab"),
            "6162",
            "qIx8Ray65QDI9s9SyboNig",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("orders"),
            "036f72646572f3",
            "C0xoxP9hLjXvqHeh/EoBFA",
        ),
        (
            Codec::String,
            EntryKey::from("orders"),
            "6f7264657273",
            "fkpb4qUHoaX1lP+lHM7glg",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("42"),
            "0334b2",
            "sBznBu9nWKelQvUeofpN5Q",
        ),
        (
            Codec::String,
            EntryKey::from("42"),
            "3432",
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("héllo"),
            "038668c3a96c6c6f",
            "HQvB+8Qy7DfRFKzQpsKmrA",
        ),
        (
            Codec::String,
            EntryKey::from("héllo"),
            "68c3a96c6c6f",
            "C21sdzlNA76/qU3dH4L30Q",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("日本"),
            "0383e697a5e69cac",
            "MSKB0r84NVMFTppCsLplMA",
        ),
        (
            Codec::String,
            EntryKey::from("日本"),
            "e697a5e69cac",
            "YMp3uR2CoSTQZ7LNbmNtfQ",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("🦀"),
            "0383eda0beedb680",
            "T2cPdB8Xsjb+CZPlRo0ezA",
        ),
        (
            Codec::String,
            EntryKey::from("🦀"),
            "f09fa680",
            "hZ/+1N/uTKhpek5etqzSag",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("abcdefghijklmnopqrstuvwxyz012345"),
            "036162636465666768696a6b6c6d6e6f707172737475767778797a3031323334b5",
            "2pB9f2ym8fRH74M0RSeu2Q",
        ),
        (
            Codec::String,
            EntryKey::from("abcdefghijklmnopqrstuvwxyz012345"),
            "6162636465666768696a6b6c6d6e6f707172737475767778797a303132333435",
            "UvL6UsyY2Fdfr5Y3tauCmQ",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("abcdefghijklmnopqrstuvwxyz0123456"),
            "03a26162636465666768696a6b6c6d6e6f707172737475767778797a30313233343536",
            "ICw4wVUW4FpMl+jMxPJhlg",
        ),
        (
            Codec::String,
            EntryKey::from("abcdefghijklmnopqrstuvwxyz0123456"),
            "6162636465666768696a6b6c6d6e6f707172737475767778797a30313233343536",
            "wD9OKwY7gMqg1tHiQjuIFA",
        ),
        (
            Codec::Kryo5,
            EntryKey::from("a\u{0}b"),
            "036100e2",
            "m8v7/4jDHicWj+DTbiRS/w",
        ),
        (
            Codec::String,
            EntryKey::from("a\u{0}b"),
            "610062",
            "tNjYisQJBkJLerTj8rb+XQ",
        ),
        (
            Codec::Kryo5,
            EntryKey::Integer(0),
            "0200",
            "AXJOiXOkq0l3g2Yp0s2hBA",
        ),
        (
            Codec::String,
            EntryKey::Integer(0),
            "30",
            "I2kUHdl8HbsQNIDl8JP34g",
        ),
        (
            Codec::Kryo5,
            EntryKey::Integer(42),
            "0254",
            "Y5MJ+mge9H+XMmohFCsrTg",
        ),
        (
            Codec::String,
            EntryKey::Integer(42),
            "3432",
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            Codec::Kryo5,
            EntryKey::Integer(-1),
            "0201",
            "qsKacN1I9GWtvTr65GdF+A",
        ),
        (
            Codec::String,
            EntryKey::Integer(-1),
            "2d31",
            "Erwt0d03qvNX2RVaoeFZSw",
        ),
        (
            Codec::Kryo5,
            EntryKey::Integer(300),
            "02d804",
            "tkePp8q6EwlXVe1QFcmxwQ",
        ),
        (
            Codec::String,
            EntryKey::Integer(300),
            "333030",
            "uu0Y012ullTE5WL1k4kncg",
        ),
        (
            Codec::Kryo5,
            EntryKey::Integer(i32::MIN),
            "02ffffffff0f",
            "R1kKuDeBmc0eqIAvhdu5Tw",
        ),
        (
            Codec::String,
            EntryKey::Integer(i32::MIN),
            "2d32313437343833363438",
            "to/NK9JXa8MezLiZYJth/A",
        ),
        (
            Codec::Kryo5,
            EntryKey::Integer(i32::MAX),
            "02feffffff0f",
            "aSEd1BBoUDLIZrKOsmDKIw",
        ),
        (
            Codec::String,
            EntryKey::Integer(i32::MAX),
            "32313437343833363437",
            "tILSqzA2lgYv2L3AxQjGZw",
        ),
        (
            Codec::Kryo5,
            EntryKey::Long(0),
            "0900",
            "mrRdTCh4+gAcPKYY3tDnzQ",
        ),
        (
            Codec::String,
            EntryKey::Long(0),
            "30",
            "I2kUHdl8HbsQNIDl8JP34g",
        ),
        (
            Codec::Kryo5,
            EntryKey::Long(42),
            "0954",
            "VQXPsX8R0Nuk4PCULzvfjg",
        ),
        (
            Codec::String,
            EntryKey::Long(42),
            "3432",
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            Codec::Kryo5,
            EntryKey::Long(-1),
            "0901",
            "xJu5jSgdkBnDY4Uawe4lZw",
        ),
        (
            Codec::String,
            EntryKey::Long(-1),
            "2d31",
            "Erwt0d03qvNX2RVaoeFZSw",
        ),
        (
            Codec::Kryo5,
            EntryKey::Long(300),
            "09d804",
            "ud86t9LWMOiyI40GS8FKZw",
        ),
        (
            Codec::String,
            EntryKey::Long(300),
            "333030",
            "uu0Y012ullTE5WL1k4kncg",
        ),
        (
            Codec::Kryo5,
            EntryKey::Long(1 << 55),
            "09808080808080808001",
            "64MGrsgGqHn6cgXZ+gq+zg",
        ),
        (
            Codec::String,
            EntryKey::Long(1 << 55),
            "3336303238373937303138393633393638",
            "3VGEka/4FapQ8VgV4GQpFg",
        ),
        (
            Codec::Kryo5,
            EntryKey::Long(1 << 56),
            "09808080808080808002",
            "UAI8dMh++kjrW0khVXdafQ",
        ),
        (
            Codec::String,
            EntryKey::Long(1 << 56),
            "3732303537353934303337393237393336",
            "Um9pbwqnTbLu5oGUt+d9Og",
        ),
        (
            Codec::Kryo5,
            EntryKey::Long(i64::MIN),
            "09ffffffffffffffffff",
            "8wAGzfg3roSo3NdLNkzw7w",
        ),
        (
            Codec::String,
            EntryKey::Long(i64::MIN),
            "2d39323233333732303336383534373735383038",
            "76gtm/GfSHe7ceJQSrYhhw",
        ),
        (
            Codec::Kryo5,
            EntryKey::Long(i64::MAX),
            "09feffffffffffffffff",
            "oHmWFzLkUeNAtvvz0oDfqw",
        ),
        (
            Codec::String,
            EntryKey::Long(i64::MAX),
            "39323233333732303336383534373735383037",
            "u4knuatUzHiT6Vhz9t2maQ",
        ),
        (
            Codec::Kryo5,
            EntryKey::Uuid(uuid("1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed")),
            "01006a6176612e7574696c2e555549c42d4bfdbbcd6b9d1bed4bbdfb8dab5d9b",
            "VS9LcfZgC20suZo2gYj2zQ",
        ),
        (
            Codec::String,
            EntryKey::Uuid(uuid("1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed")),
            "31623964366263642d626266642d346232642d396235642d616238646662626434626564",
            "Fe8f/lt+AUzaof9Hbl4xtw",
        ),
        (
            Codec::Kryo5,
            EntryKey::Uuid(uuid("00000000-0000-0000-0000-000000000000")),
            "01006a6176612e7574696c2e555549c400000000000000000000000000000000",
            "VIFQLE2IjdMMIGH8pugLmw",
        ),
        (
            Codec::String,
            EntryKey::Uuid(uuid("00000000-0000-0000-0000-000000000000")),
            "30303030303030302d303030302d303030302d303030302d303030303030303030303030",
            "2bcCbW4U4JSJx09FojGwzQ",
        ),
    ]
}

#[test]
fn kryo5_and_string_codecs_write_javas_bytes_and_hash_them_as_redisson() {
    for (codec, key, bytes, hash) in java_goldens() {
        let encoded = codec.encode(&key).expect("a supported key");
        assert_eq!(hex(&encoded), bytes, "{codec} {key}");
        assert_eq!(hash128_base64(&encoded), hash, "{codec} {key}");
        assert_eq!(
            codec.hash(&key).expect("a supported key"),
            hash,
            "{codec} {key}"
        );
    }
}

#[test]
fn long_and_integer_codecs_write_what_the_string_codec_writes() {
    for (codec, key, bytes, _) in java_goldens() {
        if codec == Codec::String {
            for same in [Codec::Long, Codec::Integer] {
                assert_eq!(
                    hex(&same.encode(&key).expect("a supported key")),
                    bytes,
                    "{same} {key}"
                );
            }
        }
    }
}

#[test]
fn json_codecs_write_jacksons_json() {
    let id = uuid("1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed");
    let cases = [
        (
            Codec::JsonJackson,
            EntryKey::from("orders"),
            r#""orders""#,
            "kJYNoec82SpeS6V2nPgVDQ",
        ),
        (
            Codec::JsonJackson,
            EntryKey::Integer(42),
            "42",
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            Codec::JsonJackson,
            EntryKey::Long(42),
            r#"["java.lang.Long",42]"#,
            "WwNbBTVB1zGkaLw39wufaA",
        ),
        (
            Codec::JsonJackson,
            EntryKey::Uuid(id),
            r#"["java.util.UUID","1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed"]"#,
            "DloBjnAfWlk2eaMXBAYxGg",
        ),
        (
            Codec::JsonJackson,
            EntryKey::from("a\"b\\c\n\u{1}é"),
            r#""a\"b\\c\n\u0001é""#,
            "2x3oN8Tsv8bpzxuIBIhNnw",
        ),
        (
            Codec::TypedJsonJackson,
            EntryKey::from("orders"),
            r#""orders""#,
            "kJYNoec82SpeS6V2nPgVDQ",
        ),
        (
            Codec::TypedJsonJackson,
            EntryKey::Integer(42),
            "42",
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            Codec::TypedJsonJackson,
            EntryKey::Long(42),
            "42",
            "RE0IojEvPTY8Dofe3IkBNA",
        ),
        (
            Codec::TypedJsonJackson,
            EntryKey::Uuid(id),
            r#""1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed""#,
            "mICbI9xNLjqZEwL26tC2iQ",
        ),
    ];
    for (codec, key, json, hash) in cases {
        let encoded = codec.encode(&key).expect("a supported key");
        assert_eq!(String::from_utf8_lossy(&encoded), json, "{codec} {key}");
        assert_eq!(hash128_base64(&encoded), hash, "{codec} {key}");
    }
}

#[test]
fn an_encoded_key_is_taken_as_it_is_by_every_codec() {
    let key = EntryKey::Encoded(b"orders".to_vec());
    for codec in [
        Codec::Kryo5,
        Codec::String,
        Codec::JsonJackson,
        Codec::Other("x.Y".into()),
    ] {
        assert_eq!(codec.encode(&key).expect("bytes"), b"orders", "{codec}");
        assert_eq!(codec.hash(&key).expect("bytes"), "fkpb4qUHoaX1lP+lHM7glg");
    }
}

#[test]
fn another_codec_refuses_a_typed_key_with_the_reason() {
    let codec = Codec::from_java_class("org.redisson.codec.SmileJacksonCodec");
    assert_eq!(
        codec,
        Codec::Other("org.redisson.codec.SmileJacksonCodec".into())
    );
    match codec.encode(&EntryKey::Long(42)) {
        Err(Error::Codec { codec, reason }) => {
            assert_eq!(codec, "org.redisson.codec.SmileJacksonCodec");
            assert!(reason.contains("EntryKey::Encoded"), "{reason}");
        }
        other => panic!("expected a codec error, got {other:?}"),
    }
}

#[test]
fn java_class_names_round_trip() {
    for codec in [
        Codec::Kryo5,
        Codec::String,
        Codec::Long,
        Codec::Integer,
        Codec::JsonJackson,
        Codec::TypedJsonJackson,
    ] {
        assert_eq!(Codec::from_java_class(codec.java_class()), codec);
    }
    assert_eq!(Codec::default(), Codec::Kryo5);
}

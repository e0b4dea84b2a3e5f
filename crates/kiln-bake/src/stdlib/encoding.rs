//! Built-in functions: encoding group.
//!
//! hashicorp/go-cty-funcs' `encoding` (`base64decode`, `base64encode`,
//! `urlencode`), `crypto` (`bcrypt`, `md5`, `rsadecrypt`, `sha1`, `sha256`,
//! `sha512`), `uuid` (`uuidv4`, `uuidv5`) and `cidr` functions (the latter over
//! apparentlymart/go-cidr v1.0.1, the version buildx vendors), go-cty's
//! `formatdate` and `timeadd`, and buildx's own `timestamp`, `formattimestamp`
//! and `unixtimestampparse`.
//!
//! The Go library behaviour that shows through is re-created rather than
//! approximated with Rust equivalents: `time.Parse` with the RFC 3339 layout
//! (including where it stops, which cty turns into its error messages),
//! `time.ParseDuration`, Go's `Time.Format` of years and zone offsets,
//! `net.ParseCIDR` and the `net.IP`/`net.IPNet` helpers go-cidr builds on,
//! `encoding/pem` and `encoding/base64` decoding, and `url.QueryEscape`.
//! Where Go would panic (go-cidr indexing past an address) the error reads as
//! cty reports a recovered panic; nothing here panics.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::goquote::go_quote_bytes;
use super::{FuncError, Function, Param};
use crate::value::{Type, Value};

pub(super) fn register(out: &mut Vec<Function>) {
    let string = |name: &'static str| Param::new(name, Type::String);
    let num = |name: &'static str| Param::new(name, Type::Number);

    out.push(Function::new(
        "base64decode",
        vec![string("str")],
        base64decode,
    ));
    out.push(Function::new(
        "base64encode",
        vec![string("str")],
        base64encode,
    ));
    out.push(Function::variadic(
        "bcrypt",
        vec![string("str")],
        num("cost"),
        bcrypt_hash,
    ));
    out.push(Function::new(
        "cidrhost",
        vec![string("prefix"), num("hostnum")],
        cidrhost,
    ));
    out.push(Function::new(
        "cidrnetmask",
        vec![string("prefix")],
        cidrnetmask,
    ));
    out.push(Function::new(
        "cidrsubnet",
        vec![string("prefix"), num("newbits"), num("netnum")],
        cidrsubnet,
    ));
    out.push(Function::variadic(
        "cidrsubnets",
        vec![string("prefix")],
        num("newbits"),
        cidrsubnets,
    ));
    out.push(Function::new(
        "formatdate",
        vec![string("format"), string("time")],
        formatdate,
    ));
    out.push(Function::new(
        "formattimestamp",
        vec![string("format"), Param::new("time", Type::Dynamic)],
        formattimestamp,
    ));
    out.push(Function::new("md5", vec![string("str")], md5_hex));
    out.push(Function::new(
        "rsadecrypt",
        vec![string("ciphertext"), string("privatekey")],
        rsadecrypt,
    ));
    out.push(Function::new("sha1", vec![string("str")], sha1_hex));
    out.push(Function::new("sha256", vec![string("str")], sha256_hex));
    out.push(Function::new("sha512", vec![string("str")], sha512_hex));
    out.push(Function::new(
        "timeadd",
        vec![string("timestamp"), string("duration")],
        timeadd,
    ));
    out.push(Function::new("timestamp", vec![], timestamp));
    out.push(Function::new(
        "unixtimestampparse",
        vec![num("unix_timestamp")],
        unixtimestampparse,
    ));
    out.push(Function::new("urlencode", vec![string("str")], urlencode));
    out.push(Function::new("uuidv4", vec![], uuidv4));
    out.push(Function::new(
        "uuidv5",
        vec![string("namespace"), string("name")],
        uuidv5,
    ));
}

// ------------------------------------------------------------------ helpers

/// Argument `i` as a string (arguments arrive converted; "" guards the impossible).
fn str_arg(args: &[Value], i: usize) -> &str {
    args.get(i).and_then(Value::as_str).unwrap_or("")
}

/// gocty's error for a number that does not fit a Go `int`.
const GOCTY_INT_ERR: &str =
    "value must be a whole number, between -9223372036854775808 and 9223372036854775807";

/// The number as an `int64` when it is a whole number in range (what
/// `big.Float.Int64` reports as exact, and what gocty accepts for an `int`).
fn exact_i64(n: f64) -> Option<i64> {
    // -2^63 and 2^63 are exactly representable, so the range test is exact.
    let in_range = (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n);
    (n.is_finite() && n.fract() == 0.0 && in_range).then_some(n as i64)
}

/// gocty's conversion of a number value into a Go `int`.
fn gocty_int(v: &Value) -> Result<i64, String> {
    v.as_number()
        .and_then(exact_i64)
        .ok_or_else(|| GOCTY_INT_ERR.to_string())
}

/// gocty's conversion of argument `i` into a Go `int`.
fn gocty_int_arg(args: &[Value], i: usize) -> Result<i64, String> {
    args.get(i)
        .map_or_else(|| Err(GOCTY_INT_ERR.to_string()), gocty_int)
}

/// The `time` package's own `quote` (used in `time.ParseDuration` errors):
/// non-ASCII and control characters are written byte by byte as `\xNN`.
fn time_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if !c.is_ascii() || c < ' ' {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\x{b:02x}");
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

fn hex_lower(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

// ------------------------------------------------------------------ encoding

/// Go's `base64.StdEncoding` decoder: padding required, non-zero trailing bits
/// accepted.
const GO_STD_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// `base64.StdEncoding.DecodeString`, which skips `\r` and `\n` anywhere.
fn go_base64_decode(data: &[u8]) -> Option<Vec<u8>> {
    let cleaned: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| *b != b'\r' && *b != b'\n')
        .collect();
    GO_STD_BASE64.decode(cleaned).ok()
}

fn base64decode(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0);
    let decoded = go_base64_decode(s.as_bytes())
        .ok_or_else(|| FuncError::failed(format!("failed to decode base64 data '{s}'")))?;
    String::from_utf8(decoded).map(Value::String).map_err(|_| {
        FuncError::failed("the result of decoding the the provided string is not valid UTF-8")
    })
}

fn base64encode(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::String(GO_STD_BASE64.encode(str_arg(args, 0))))
}

/// Go's `url.QueryEscape`.
fn urlencode(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0);
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    Ok(Value::String(out))
}

// ------------------------------------------------------------------ hashes

fn md5_hex(args: &[Value]) -> Result<Value, FuncError> {
    use md5::Digest as _;
    let sum = md5::Md5::digest(str_arg(args, 0).as_bytes());
    Ok(Value::String(hex_lower(&sum)))
}

fn sha1_hex(args: &[Value]) -> Result<Value, FuncError> {
    use sha1::Digest as _;
    let sum = sha1::Sha1::digest(str_arg(args, 0).as_bytes());
    Ok(Value::String(hex_lower(&sum)))
}

fn sha256_hex(args: &[Value]) -> Result<Value, FuncError> {
    use sha2::Digest as _;
    let sum = sha2::Sha256::digest(str_arg(args, 0).as_bytes());
    Ok(Value::String(hex_lower(&sum)))
}

fn sha512_hex(args: &[Value]) -> Result<Value, FuncError> {
    use sha2::Digest as _;
    let sum = sha2::Sha512::digest(str_arg(args, 0).as_bytes());
    Ok(Value::String(hex_lower(&sum)))
}

/// go-cty-funcs' `bcrypt(str, cost...)` over `golang.org/x/crypto/bcrypt`:
/// costs below 4 fall back to 10, passwords over 72 bytes are refused, and the
/// hash is written with the `$2a$` prefix.
fn bcrypt_hash(args: &[Value]) -> Result<Value, FuncError> {
    let mut cost: i64 = 10;
    if let Some(v) = args.get(1) {
        cost = gocty_int(v).map_err(FuncError::failed)?;
    }
    if args.len() > 2 {
        return Err(FuncError::failed(
            "bcrypt() takes no more than two arguments",
        ));
    }
    let input = str_arg(args, 0);
    let generate =
        |msg: String| FuncError::failed(format!("error occured generating password {msg}"));
    if input.len() > 72 {
        return Err(generate(
            "bcrypt: password length exceeds 72 bytes".to_string(),
        ));
    }
    if cost < 4 {
        cost = 10;
    }
    let cost = match u32::try_from(cost) {
        Ok(c) if c <= 31 => c,
        _ => {
            return Err(generate(format!(
                "crypto/bcrypt: cost {cost} is outside allowed range (4,31)"
            )));
        }
    };
    let parts = bcrypt::hash_with_result(input, cost).map_err(|e| generate(e.to_string()))?;
    Ok(Value::String(
        parts.format_for_version(bcrypt::Version::TwoA),
    ))
}

// ------------------------------------------------------------------ rsadecrypt

/// An `encoding/pem` block: its headers and decoded body.
struct PemBlock {
    headers: HashMap<String, String>,
    bytes: Vec<u8>,
}

/// `encoding/pem`'s `getLine`: the line without its `\n` (or `\r\n`) and
/// trailing spaces/tabs, and the rest.
fn pem_get_line(data: &[u8]) -> (&[u8], &[u8]) {
    let (mut end, next) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (i, i + 1),
        None => (data.len(), data.len()),
    };
    if next != end && end > 0 && data[end - 1] == b'\r' {
        end -= 1;
    }
    let mut line = &data[..end];
    while let [rest @ .., b' ' | b'\t'] = line {
        line = rest;
    }
    (line, &data[next..])
}

fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn trim_space_lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// `pem.Decode`: the first well-formed block anywhere in `data`.
fn pem_decode(data: &[u8]) -> Option<PemBlock> {
    const START: &[u8] = b"\n-----BEGIN ";
    const END: &[u8] = b"\n-----END ";
    const EOL: &[u8] = b"-----";
    let mut rest = data;
    loop {
        if rest.starts_with(&START[1..]) {
            rest = &rest[START.len() - 1..];
        } else if let Some(pos) = find_bytes(rest, START) {
            rest = &rest[pos + START.len()..];
        } else {
            return None;
        }
        let (type_line, after) = pem_get_line(rest);
        rest = after;
        let Some(type_line) = type_line.strip_suffix(EOL) else {
            continue;
        };

        let mut headers = HashMap::new();
        loop {
            if rest.is_empty() {
                return None;
            }
            let (line, next) = pem_get_line(rest);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                break;
            };
            headers.insert(
                trim_space_lossy(&line[..colon]),
                trim_space_lossy(&line[colon + 1..]),
            );
            rest = next;
        }

        let (end_index, end_trailer_index) = if headers.is_empty() && rest.starts_with(&END[1..]) {
            (0, END.len() - 1)
        } else {
            match find_bytes(rest, END) {
                Some(i) => (i, i + END.len()),
                None => continue,
            }
        };
        let end_trailer = &rest[end_trailer_index..];
        let end_trailer_len = type_line.len() + EOL.len();
        if end_trailer.len() < end_trailer_len {
            continue;
        }
        let (end_trailer, rest_of_end_line) = end_trailer.split_at(end_trailer_len);
        if !end_trailer.starts_with(type_line) || !end_trailer.ends_with(EOL) {
            continue;
        }
        if !pem_get_line(rest_of_end_line).0.is_empty() {
            continue;
        }
        let body: Vec<u8> = rest[..end_index]
            .iter()
            .copied()
            .filter(|b| *b != b' ' && *b != b'\t')
            .collect();
        match go_base64_decode(&body) {
            Some(bytes) => return Some(PemBlock { headers, bytes }),
            None => continue,
        }
    }
}

/// One DER element: its tag, its contents and what follows it.
fn der_read(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = data.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 8 || rest.len() < n {
            return None;
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = len.checked_mul(256)?.checked_add(usize::from(b))?;
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The tags of the elements of a DER SEQUENCE, if `data` starts with one.
fn der_sequence_tags(data: &[u8]) -> Option<Vec<u8>> {
    let (tag, mut content, _) = der_read(data)?;
    if tag != 0x30 {
        return None;
    }
    let mut tags = Vec::new();
    while !content.is_empty() {
        let (t, _, rest) = der_read(content)?;
        tags.push(t);
        content = rest;
    }
    Some(tags)
}

/// `x509.ParsePKCS1PrivateKey`, with its hints for EC and PKCS#8 keys.
fn parse_pkcs1_private_key(der: &[u8]) -> Result<rsa::PrivateKey, String> {
    use rsa::pkcs1::DecodeRsaPrivateKey as _;
    match rsa::PrivateKey::from_pkcs1_der(der) {
        Ok(key) => Ok(key),
        Err(err) => {
            if let Some((_, _, rest)) = der_read(der) {
                let used = der.len() - rest.len();
                if !rest.is_empty() && rsa::PrivateKey::from_pkcs1_der(&der[..used]).is_ok() {
                    return Err("asn1: syntax error: trailing data".to_string());
                }
            }
            let tags = der_sequence_tags(der).unwrap_or_default();
            if tags.starts_with(&[0x02, 0x04]) {
                return Err("x509: failed to parse private key (use ParseECPrivateKey instead for this key format)".to_string());
            }
            if tags.starts_with(&[0x02, 0x30, 0x04]) {
                return Err("x509: failed to parse private key (use ParsePKCS8PrivateKey instead for this key format)".to_string());
            }
            Err(match err {
                rsa::pkcs1::Error::Version => "x509: unsupported private key version".to_string(),
                other => format!("asn1: structure error: {other}"),
            })
        }
    }
}

/// An RNG type for the unblinded (`None`) RSA decryption call; never used.
struct NoRng;

impl rsa::rand_core::TryRng for NoRng {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(0)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(0)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        dst.fill(0);
        Ok(())
    }
}

impl rsa::rand_core::TryCryptoRng for NoRng {}

/// Go's `rsa.DecryptPKCS1v15`, which (unlike the `rsa` crate's implicit
/// rejection) reports invalid padding as an error.
fn decrypt_pkcs1v15(key: &rsa::PrivateKey, ciphertext: &[u8]) -> Result<Vec<u8>, String> {
    use rsa::traits::PublicKeyParts as _;
    const DECRYPTION: &str = "crypto/rsa: decryption error";
    let bits = key.n().bit_width();
    if bits < 1024 {
        return Err(format!(
            "crypto/rsa: {bits}-bit keys are insecure (see https://go.dev/pkg/crypto/rsa#hdr-Minimum_key_size)"
        ));
    }
    let k = key.size();
    if k < 11 {
        return Err(DECRYPTION.to_string());
    }
    let c = rsa::BoxedUint::from_be_slice(ciphertext, key.n_bits_precision())
        .map_err(|_| DECRYPTION.to_string())?;
    let m = rsa::hazmat::rsa_decrypt_and_check(key, None::<&mut NoRng>, &c)
        .map_err(|_| DECRYPTION.to_string())?;
    let raw = m.to_be_bytes();
    let mut em = vec![0u8; k];
    let n = raw.len().min(k);
    em[k - n..].copy_from_slice(&raw[raw.len() - n..]);
    if em[0] != 0 || em[1] != 2 {
        return Err(DECRYPTION.to_string());
    }
    match em[2..].iter().position(|&b| b == 0) {
        Some(i) if i + 2 >= 10 => Ok(em[i + 3..].to_vec()),
        _ => Err(DECRYPTION.to_string()),
    }
}

fn rsadecrypt(args: &[Value]) -> Result<Value, FuncError> {
    let s = str_arg(args, 0);
    let key = str_arg(args, 1);
    let ciphertext = go_base64_decode(s.as_bytes()).ok_or_else(|| {
        FuncError::failed(format!(
            "failed to decode input {}: cipher text must be base64-encoded",
            go_quote_bytes(s.as_bytes())
        ))
    })?;
    let block = pem_decode(key.as_bytes())
        .ok_or_else(|| FuncError::failed("failed to parse key: no key found"))?;
    if block.headers.get("Proc-Type").map(String::as_str) == Some("4,ENCRYPTED") {
        return Err(FuncError::failed(
            "failed to parse key: password protected keys are not supported. Please decrypt the key prior to use",
        ));
    }
    let private = parse_pkcs1_private_key(&block.bytes).map_err(FuncError::failed)?;
    let out = decrypt_pkcs1v15(&private, &ciphertext).map_err(FuncError::failed)?;
    Ok(Value::String(String::from_utf8_lossy(&out).into_owned()))
}

// ------------------------------------------------------------------ uuid

fn uuidv4(_args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::String(uuid::Uuid::new_v4().to_string()))
}

fn hex_pair(hi: u8, lo: u8) -> Option<u8> {
    let digit = |c: u8| char::from(c).to_digit(16);
    Some(u8::try_from(digit(hi)? * 16 + digit(lo)?).unwrap_or(0))
}

/// google/uuid's `Parse`, with its error texts.
fn go_uuid_parse(s: &str) -> Result<uuid::Uuid, String> {
    const BAD: &str = "invalid UUID format";
    let b = s.as_bytes();
    let mut out = [0u8; 16];
    let body = match b.len() {
        36 => b,
        45 => {
            if !b[..9].eq_ignore_ascii_case(b"urn:uuid:") {
                return Err(format!("invalid urn prefix: {}", go_quote_bytes(&b[..9])));
            }
            &b[9..]
        }
        38 => &b[1..],
        32 => {
            for (i, slot) in out.iter_mut().enumerate() {
                *slot = hex_pair(b[i * 2], b[i * 2 + 1]).ok_or(BAD)?;
            }
            return Ok(uuid::Uuid::from_bytes(out));
        }
        n => return Err(format!("invalid UUID length: {n}")),
    };
    if body[8] != b'-' || body[13] != b'-' || body[18] != b'-' || body[23] != b'-' {
        return Err(BAD.to_string());
    }
    const OFFSETS: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
    for (slot, x) in out.iter_mut().zip(OFFSETS) {
        *slot = hex_pair(body[x], body[x + 1]).ok_or(BAD)?;
    }
    Ok(uuid::Uuid::from_bytes(out))
}

fn uuidv5(args: &[Value]) -> Result<Value, FuncError> {
    let ns = str_arg(args, 0);
    let namespace = match ns {
        "dns" => uuid::Uuid::NAMESPACE_DNS,
        "url" => uuid::Uuid::NAMESPACE_URL,
        "oid" => uuid::Uuid::NAMESPACE_OID,
        "x500" => uuid::Uuid::NAMESPACE_X500,
        _ => go_uuid_parse(ns).map_err(|e| {
            FuncError::failed(format!("uuidv5() doesn't support namespace {ns} ({e})"))
        })?,
    };
    let name = str_arg(args, 1);
    Ok(Value::String(
        uuid::Uuid::new_v5(&namespace, name.as_bytes()).to_string(),
    ))
}

// ------------------------------------------------------------------ cidr
//
// Addresses and masks are Go `net.IP` / `net.IPMask` byte slices: 4 or 16
// bytes, or empty where Go has nil.

const V4_IN_V6_PREFIX: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
/// `net.IPv4zero`, stored in its 16-byte form.
const IPV4_ZERO: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0];
const IPV6_ZERO: [u8; 16] = [0; 16];

/// An error as cty reports a recovered Go panic.
fn go_panic(msg: &str) -> FuncError {
    FuncError::failed(format!("panic in function implementation: {msg}"))
}

/// go-cidr's `intToIP` indexing below the start of its buffer.
fn index_panic() -> FuncError {
    go_panic("runtime error: index out of range [-1]")
}

/// `net.IP.To4`.
fn to4(ip: &[u8]) -> Option<&[u8]> {
    match ip.len() {
        4 => Some(ip),
        16 if ip[..12] == V4_IN_V6_PREFIX => Some(&ip[12..]),
        _ => None,
    }
}

/// go-cidr's `checkIPv4`.
fn check_ipv4(ip: &[u8]) -> Vec<u8> {
    to4(ip).unwrap_or(ip).to_vec()
}

/// `net.IP.Mask`; empty where Go returns nil.
fn ip_mask(ip: &[u8], mask: &[u8]) -> Vec<u8> {
    let mut ip = ip;
    let mut mask = mask;
    if mask.len() == 16 && ip.len() == 4 && mask[..12].iter().all(|b| *b == 0xff) {
        mask = &mask[12..];
    }
    if mask.len() == 4 && ip.len() == 16 && ip[..12] == V4_IN_V6_PREFIX {
        ip = &ip[12..];
    }
    if ip.len() != mask.len() {
        return Vec::new();
    }
    ip.iter().zip(mask).map(|(a, m)| a & m).collect()
}

/// `net.IP.Equal`.
fn ip_equal(a: &[u8], b: &[u8]) -> bool {
    match (a.len(), b.len()) {
        (x, y) if x == y => a == b,
        (4, 16) => b[..12] == V4_IN_V6_PREFIX && a == &b[12..],
        (16, 4) => a[..12] == V4_IN_V6_PREFIX && &a[12..] == b,
        _ => false,
    }
}

/// `net.CIDRMask`; empty where Go returns nil.
fn cidr_mask(ones: i64, bits: i64) -> Vec<u8> {
    if (bits != 32 && bits != 128) || ones < 0 || ones > bits {
        return Vec::new();
    }
    let mut out = vec![0u8; usize::try_from(bits / 8).unwrap_or(0)];
    let mut n = ones;
    for b in &mut out {
        if n >= 8 {
            *b = 0xff;
            n -= 8;
            continue;
        }
        *b = !(0xffu8 >> n);
        n = 0;
    }
    out
}

/// `net`'s `simpleMaskLength`: the prefix length of a canonical mask, or -1.
fn simple_mask_length(mask: &[u8]) -> i64 {
    let mut n = 0;
    for (i, &v) in mask.iter().enumerate() {
        if v == 0xff {
            n += 8;
            continue;
        }
        let mut v = v;
        while v & 0x80 != 0 {
            n += 1;
            v <<= 1;
        }
        if v != 0 || mask[i + 1..].iter().any(|b| *b != 0) {
            return -1;
        }
        break;
    }
    n
}

/// `net.IPMask.Size`.
fn mask_size(mask: &[u8]) -> (i64, i64) {
    match simple_mask_length(mask) {
        -1 => (0, 0),
        ones => (ones, i64::try_from(mask.len() * 8).unwrap_or(0)),
    }
}

/// `net.IP.String`.
fn ip_string(ip: &[u8]) -> String {
    if ip.is_empty() {
        return "<nil>".to_string();
    }
    if ip.len() != 4 && ip.len() != 16 {
        return format!("?{}", hex_lower(ip));
    }
    if let Some(v4) = to4(ip) {
        return format!("{}.{}.{}.{}", v4[0], v4[1], v4[2], v4[3]);
    }
    let groups: Vec<u16> = ip
        .chunks(2)
        .map(|p| u16::from_be_bytes([p[0], p[1]]))
        .collect();
    // The first longest run of two or more zero groups becomes "::".
    let mut zero_run: Option<(usize, usize)> = None;
    for i in 0..8 {
        let mut j = i;
        while j < 8 && groups[j] == 0 {
            j += 1;
        }
        let len = j - i;
        if len >= 2 && zero_run.is_none_or(|(s, e)| len > e - s) {
            zero_run = Some((i, j));
        }
    }
    let mut out = String::new();
    let mut i = 0;
    while i < 8 {
        if zero_run.is_some_and(|(s, _)| s == i) {
            out.push_str("::");
            i = zero_run.map_or(8, |(_, e)| e);
            if i >= 8 {
                break;
            }
        } else if i > 0 {
            out.push(':');
        }
        let _ = write!(out, "{:x}", groups[i]);
        i += 1;
    }
    out
}

/// `net.IPMask.String`.
fn mask_string(mask: &[u8]) -> String {
    if mask.is_empty() {
        "<nil>".to_string()
    } else {
        hex_lower(mask)
    }
}

/// `net`'s `networkNumberAndMask`.
fn network_number_and_mask<'a>(ip: &'a [u8], mask: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
    let nn = match to4(ip) {
        Some(v4) => v4,
        None if ip.len() == 16 => ip,
        None => return None,
    };
    let m = match mask.len() {
        4 if nn.len() == 4 => mask,
        4 => return None,
        16 if nn.len() == 4 => &mask[12..],
        16 => mask,
        _ => return None,
    };
    Some((nn, m))
}

/// `net.IPNet.String`.
fn ipnet_string(ip: &[u8], mask: &[u8]) -> String {
    let Some((nn, m)) = network_number_and_mask(ip, mask) else {
        return "<nil>".to_string();
    };
    match simple_mask_length(m) {
        -1 => format!("{}/{}", ip_string(nn), mask_string(m)),
        l => format!("{}/{l}", ip_string(nn)),
    }
}

/// `net.IPNet.Contains`.
fn ipnet_contains(net_ip: &[u8], net_mask: &[u8], ip: &[u8]) -> bool {
    let (nn, m) = network_number_and_mask(net_ip, net_mask).unwrap_or((&[], &[]));
    let ip = to4(ip).unwrap_or(ip);
    if ip.len() != nn.len() {
        return false;
    }
    (0..ip.len()).all(|i| {
        let mi = m.get(i).copied().unwrap_or(0);
        nn[i] & mi == ip[i] & mi
    })
}

/// `net.ParseCIDR`'s network (address masked to the prefix, and the mask).
fn parse_cidr(s: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    let err = || format!("invalid CIDR address: {s}");
    let (addr, mask) = s.split_once('/').ok_or_else(err)?;
    let (addr16, bits) = if addr.contains(':') {
        (addr.parse::<Ipv6Addr>().map_err(|_| err())?.octets(), 128)
    } else {
        let v4 = addr.parse::<Ipv4Addr>().map_err(|_| err())?;
        (v4.to_ipv6_mapped().octets(), 32)
    };
    // net's dtoi: decimal digits only, below 0xFFFFFF, the whole suffix.
    let mut n: i64 = 0;
    if mask.is_empty() {
        return Err(err());
    }
    for b in mask.bytes() {
        if !b.is_ascii_digit() {
            return Err(err());
        }
        n = n * 10 + i64::from(b - b'0');
        if n >= 0xFF_FFFF {
            return Err(err());
        }
    }
    if n > bits {
        return Err(err());
    }
    let m = cidr_mask(n, bits);
    Ok((ip_mask(&addr16, &m), m))
}

/// go-cidr's `ipToInt`.
fn ip_to_int(ip: &[u8]) -> Result<(u128, u32), FuncError> {
    let bits = match ip.len() {
        4 => 32,
        16 => 128,
        n => return Err(go_panic(&format!("Unsupported address length {n}"))),
    };
    Ok((
        ip.iter().fold(0u128, |acc, b| (acc << 8) | u128::from(*b)),
        bits,
    ))
}

/// go-cidr's `intToIP`: the magnitude, which must fit the address width.
fn int_to_ip(value: u128, bits: u32) -> Result<Vec<u8>, FuncError> {
    if bits < 128 && value >> bits != 0 {
        return Err(index_panic());
    }
    let bytes = value.to_be_bytes();
    Ok(bytes[16 - (bits as usize) / 8..].to_vec())
}

/// go-cidr's `insertNumIntoIP`: `ip | num << (totalBits - prefixLen)` in
/// `big.Int` arithmetic (a negative `num` ORs in two's complement, and the
/// address takes the magnitude).
fn insert_num_into_ip(ip: &[u8], num: i64, prefix_len: i64) -> Result<Vec<u8>, FuncError> {
    let (ip_int, total) = ip_to_int(ip)?;
    if num == 0 {
        return int_to_ip(ip_int, total);
    }
    // Go converts the difference to `uint`: a negative shift is enormous.
    let shift = i128::from(total) - i128::from(prefix_len);
    if !(0..=128).contains(&shift) {
        return Err(index_panic());
    }
    let shift = u32::try_from(shift).unwrap_or(128);
    let magnitude = u128::from(num.unsigned_abs());
    if num > 0 {
        if shift >= 128 || magnitude.leading_zeros() < shift {
            return Err(index_panic());
        }
        return int_to_ip(ip_int | (magnitude << shift), total);
    }
    // x | -m == -((((m - 1) &^ x)) + 1) for x >= 0, m > 0.
    let m_minus_1 = if shift < 128 && magnitude.leading_zeros() >= shift {
        (magnitude << shift) - 1
    } else if magnitude.is_power_of_two() && magnitude.trailing_zeros() + shift == 128 {
        u128::MAX
    } else {
        return Err(index_panic());
    };
    let t = m_minus_1 & !ip_int;
    if t == u128::MAX {
        return Err(index_panic());
    }
    int_to_ip(t + 1, total)
}

/// go-cidr v1.0.1 `Host`.
fn cidr_host(ip: &[u8], mask: &[u8], num: i64) -> Result<Vec<u8>, FuncError> {
    let (parent_len, addr_len) = mask_size(mask);
    let host_len = addr_len - parent_len;
    let max_host_num = if host_len >= 64 { 0 } else { 1u64 << host_len }.wrapping_sub(1);
    let mut num = num;
    let mut num_u = num as u64;
    if num < 0 {
        num_u = num.unsigned_abs().wrapping_sub(1);
        num = max_host_num.wrapping_sub(num_u) as i64;
    }
    if num_u > max_host_num {
        return Err(FuncError::failed(format!(
            "prefix of {parent_len} does not accommodate a host numbered {num}"
        )));
    }
    let bitlength = if to4(ip).is_some() { 32 } else { 128 };
    insert_num_into_ip(ip, num, bitlength)
}

/// go-cidr v1.0.1 `Subnet`.
fn cidr_subnet(
    ip: &[u8],
    mask: &[u8],
    new_bits: i64,
    num: i64,
) -> Result<(Vec<u8>, Vec<u8>), FuncError> {
    let (parent_len, addr_len) = mask_size(mask);
    let new_prefix_len = parent_len.wrapping_add(new_bits);
    if new_prefix_len > addr_len {
        return Err(FuncError::failed(format!(
            "insufficient address space to extend prefix of {parent_len} by {new_bits}"
        )));
    }
    // `uint64(1 << uint64(newBits))`: a negative count shifts everything out.
    let max_net_num = match u32::try_from(new_bits) {
        Ok(b) if b < 64 => 1u64 << b,
        _ => 0,
    }
    .wrapping_sub(1);
    if num as u64 > max_net_num {
        return Err(FuncError::failed(format!(
            "prefix extension of {new_bits} does not accommodate a subnet numbered {num}"
        )));
    }
    let new_ip = insert_num_into_ip(ip, num, new_prefix_len)?;
    Ok((new_ip, cidr_mask(new_prefix_len, addr_len)))
}

/// go-cidr v1.0.1 `AddressRange`.
fn address_range(ip: &[u8], mask: &[u8]) -> Result<(Vec<u8>, Vec<u8>), FuncError> {
    let first = ip.to_vec();
    let (prefix_len, bits) = mask_size(mask);
    if prefix_len == bits {
        return Ok((first.clone(), first));
    }
    let (first_int, bits) = ip_to_int(&first)?;
    let host_len = i64::from(bits) - prefix_len;
    let host_mask = match u32::try_from(host_len) {
        Ok(128) => u128::MAX,
        Ok(h) if h < 128 => (1u128 << h) - 1,
        _ => return Err(index_panic()),
    };
    let last = int_to_ip(host_mask | first_int, bits)?;
    Ok((first, last))
}

/// go-cidr's `Inc`.
fn ip_inc(ip: &[u8]) -> Vec<u8> {
    let mut out = check_ipv4(ip);
    for b in out.iter_mut().rev() {
        *b = b.wrapping_add(1);
        if *b > 0 {
            break;
        }
    }
    out
}

/// go-cidr's `Dec`.
fn ip_dec(ip: &[u8]) -> Vec<u8> {
    let mut out = check_ipv4(ip);
    for b in out.iter_mut().rev() {
        *b = b.wrapping_sub(1);
        if *b < 255 {
            break;
        }
    }
    out
}

/// go-cidr v1.0.1 `PreviousSubnet` (the rollover flag is unused by cty).
fn previous_subnet(ip: &[u8], prefix_len: i64) -> (Vec<u8>, Vec<u8>) {
    let start = check_ipv4(ip);
    let c_mask = cidr_mask(prefix_len, i64::try_from(start.len() * 8).unwrap_or(0));
    let previous = ip_dec(&start);
    (ip_mask(&previous, &c_mask), c_mask)
}

/// go-cidr v1.0.1 `NextSubnet`: the next subnet and whether the address space
/// rolled over.
fn next_subnet(
    ip: &[u8],
    mask: &[u8],
    prefix_len: i64,
) -> Result<(Vec<u8>, Vec<u8>, bool), FuncError> {
    let (_, current_last) = address_range(ip, mask)?;
    let m = cidr_mask(
        prefix_len,
        i64::try_from(current_last.len() * 8).unwrap_or(0),
    );
    let current_ip = ip_mask(&current_last, &m);
    let (_, last) = address_range(&current_ip, &m)?;
    let last = ip_inc(&last);
    let rollover = ip_equal(&last, &IPV4_ZERO) || ip_equal(&last, &IPV6_ZERO);
    Ok((ip_mask(&last, &m), m, rollover))
}

fn invalid_cidr(err: &str) -> String {
    format!("invalid CIDR expression: {err}")
}

fn cidrhost(args: &[Value]) -> Result<Value, FuncError> {
    let hostnum = gocty_int_arg(args, 1).map_err(FuncError::failed)?;
    let (ip, mask) =
        parse_cidr(str_arg(args, 0)).map_err(|e| FuncError::failed(invalid_cidr(&e)))?;
    let host = cidr_host(&ip, &mask, hostnum)?;
    Ok(Value::String(ip_string(&host)))
}

fn cidrnetmask(args: &[Value]) -> Result<Value, FuncError> {
    let (_, mask) =
        parse_cidr(str_arg(args, 0)).map_err(|e| FuncError::failed(invalid_cidr(&e)))?;
    Ok(Value::String(ip_string(&mask)))
}

fn cidrsubnet(args: &[Value]) -> Result<Value, FuncError> {
    let newbits = gocty_int_arg(args, 1).map_err(FuncError::failed)?;
    let netnum = gocty_int_arg(args, 2).map_err(FuncError::failed)?;
    let (ip, mask) =
        parse_cidr(str_arg(args, 0)).map_err(|e| FuncError::failed(invalid_cidr(&e)))?;
    if newbits > 32 {
        return Err(FuncError::failed(
            "may not extend prefix by more than 32 bits",
        ));
    }
    let (sub_ip, sub_mask) = cidr_subnet(&ip, &mask, newbits, netnum)?;
    Ok(Value::String(ipnet_string(&sub_ip, &sub_mask)))
}

fn cidrsubnets(args: &[Value]) -> Result<Value, FuncError> {
    let (net_ip, net_mask) =
        parse_cidr(str_arg(args, 0)).map_err(|e| FuncError::arg(0, invalid_cidr(&e)))?;
    let (start_prefix_len, _) = mask_size(&net_mask);
    let lengths = args.get(1..).unwrap_or_default();
    let Some(first) = lengths.first() else {
        return Ok(Value::list_of(Type::String, Vec::new()));
    };
    let first_length = gocty_int(first)
        .map_err(|e| FuncError::arg(1, e))?
        .wrapping_add(start_prefix_len);
    let (mut cur_ip, mut cur_mask) = previous_subnet(&net_ip, first_length);
    let addr_bits = i64::try_from(net_ip.len() * 8).unwrap_or(0);
    let mut out = Vec::with_capacity(lengths.len());
    for (i, arg) in lengths.iter().enumerate() {
        let index = i + 1;
        let length = gocty_int(arg).map_err(|e| FuncError::arg(index, e))?;
        if length < 1 {
            return Err(FuncError::arg(
                index,
                "must extend prefix by at least one bit",
            ));
        }
        if length > 32 {
            return Err(FuncError::arg(
                index,
                "may not extend prefix by more than 32 bits",
            ));
        }
        let length = length + start_prefix_len;
        if length > addr_bits {
            let protocol = match addr_bits {
                32 => "IPv4",
                128 => "IPv6",
                _ => "IP",
            };
            return Err(FuncError::arg(
                index,
                format!(
                    "would extend prefix to {length} bits, which is too long for an {protocol} address"
                ),
            ));
        }
        let (next_ip, next_mask, rollover) = next_subnet(&cur_ip, &cur_mask, length)?;
        if rollover || !ipnet_contains(&net_ip, &net_mask, &next_ip) {
            return Err(FuncError::arg(
                index,
                format!(
                    "not enough remaining address space for a subnet with a prefix of {length} bits after {}",
                    ipnet_string(&cur_ip, &cur_mask)
                ),
            ));
        }
        cur_ip = next_ip;
        cur_mask = next_mask;
        out.push(Value::String(ipnet_string(&cur_ip, &cur_mask)));
    }
    Ok(Value::list_of(Type::String, out))
}

// ------------------------------------------------------------------ time

const NANOS_PER_SEC: i64 = 1_000_000_000;
const SECS_PER_DAY: i128 = 86_400;

const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A Go `time.Time` as far as these functions see it: an instant and the
/// zone offset it is presented in.
#[derive(Clone, Copy, Debug, PartialEq)]
struct GoTime {
    /// Seconds since the Unix epoch.
    unix: i64,
    /// Nanoseconds within the second, `0..1e9`.
    nsec: i64,
    /// Zone offset in seconds east of UTC.
    offset: i64,
}

/// Calendar fields of a [`GoTime`] in its own zone.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// Day of the year, from 1.
    yday: i64,
    /// Day of the week, Sunday = 0.
    weekday: usize,
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl GoTime {
    fn utc(unix: i64) -> GoTime {
        GoTime {
            unix,
            nsec: 0,
            offset: 0,
        }
    }

    /// Local days since the epoch and seconds into that day.
    fn local_day(self) -> (i64, u32) {
        let local = i128::from(self.unix) + i128::from(self.offset);
        let days = i64::try_from(local.div_euclid(SECS_PER_DAY)).unwrap_or(0);
        let secs = u32::try_from(local.rem_euclid(SECS_PER_DAY)).unwrap_or(0);
        (days, secs)
    }

    fn civil(self) -> Civil {
        let (days, secs) = self.local_day();
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
            yday: days - days_from_civil(year, 1, 1) + 1,
            weekday: usize::try_from((days + 4).rem_euclid(7)).unwrap_or(0),
        }
    }

    /// Go's `Time.ISOWeek`: the year and week of the Thursday of this
    /// Monday-to-Sunday week.
    fn iso_week(self) -> (i64, i64) {
        let (days, _) = self.local_day();
        let weekday = (days + 4).rem_euclid(7);
        let iso_weekday = if weekday == 0 { 7 } else { weekday };
        let thursday = days + 4 - iso_weekday;
        let (year, _, _) = civil_from_days(thursday);
        let yday0 = thursday - days_from_civil(year, 1, 1);
        (year, yday0 / 7 + 1)
    }

    /// Go's `Time.Add`.
    fn add(self, d: i64) -> GoTime {
        let mut dsec = d / NANOS_PER_SEC;
        let mut nsec = self.nsec + d % NANOS_PER_SEC;
        if nsec >= NANOS_PER_SEC {
            dsec += 1;
            nsec -= NANOS_PER_SEC;
        } else if nsec < 0 {
            dsec -= 1;
            nsec += NANOS_PER_SEC;
        }
        GoTime {
            unix: self.unix.saturating_add(dsec),
            nsec,
            offset: self.offset,
        }
    }
}

/// Go's layout year (`2006`): at least four digits, the sign before them.
fn go_year(year: i64) -> String {
    if year < 0 {
        format!("-{:04}", year.unsigned_abs())
    } else {
        format!("{year:04}")
    }
}

/// Go's zone layouts: `Z07:00` (`colon`, `z_for_utc`), `-07:00` (`colon`) and
/// `-0700`.
fn go_zone(offset: i64, colon: bool, z_for_utc: bool) -> String {
    if z_for_utc && offset == 0 {
        return "Z".to_string();
    }
    let mut zone = offset / 60;
    let sign = if zone < 0 {
        zone = -zone;
        '-'
    } else {
        '+'
    };
    let sep = if colon { ":" } else { "" };
    format!("{sign}{:02}{sep}{:02}", zone / 60, zone % 60)
}

/// `t.Format(time.RFC3339)`.
fn format_rfc3339(t: GoTime) -> String {
    let c = t.civil();
    format!(
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}{}",
        go_year(c.year),
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        go_zone(t.offset, true, true)
    )
}

/// A Go `time.ParseError`, as far as cty looks at it.
#[derive(Debug)]
struct ParseErr {
    layout_elem: &'static str,
    value_elem: Vec<u8>,
    message: String,
}

fn parse_err(layout_elem: &'static str, value_elem: &[u8], message: &str) -> ParseErr {
    ParseErr {
        layout_elem,
        value_elem: value_elem.to_vec(),
        message: message.to_string(),
    }
}

/// time's `getnum`: one or two leading digits (exactly two when `fixed`).
fn getnum(s: &[u8], fixed: bool) -> Option<(i64, &[u8])> {
    let digit = |i: usize| {
        s.get(i)
            .filter(|c| c.is_ascii_digit())
            .map(|c| i64::from(c - b'0'))
    };
    let first = digit(0)?;
    match digit(1) {
        Some(second) => Some((first * 10 + second, &s[2..])),
        None if fixed => None,
        None => Some((first, &s[1..])),
    }
}

/// time's `skip` for a one-character layout literal.
fn skip(v: &[u8], c: u8) -> Result<&[u8], &[u8]> {
    match v.first() {
        Some(&b) if b == c => Ok(&v[1..]),
        _ => Err(v),
    }
}

/// `time.Parse(time.RFC3339, value)`: the generic parser's acceptance and the
/// exact element and remaining input at which it gives up (Go first tries a
/// faster parser, which accepts a subset of this with the same result).
fn parse_rfc3339(value: &str) -> Result<GoTime, ParseErr> {
    let mut v = value.as_bytes();

    // 2006
    let hold = v;
    if v.len() < 4 || !v[0].is_ascii_digit() {
        return Err(parse_err("2006", hold, ""));
    }
    let (digits, rest) = v.split_at(4);
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(parse_err("2006", hold, ""));
    }
    let year = digits
        .iter()
        .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
    v = rest;

    // -01
    v = skip(v, b'-').map_err(|rest| parse_err("-", rest, ""))?;
    let hold = v;
    let (month, rest) = getnum(v, true).ok_or_else(|| parse_err("01", hold, ""))?;
    v = rest;
    if !(1..=12).contains(&month) {
        return Err(parse_err("01", v, ": month out of range"));
    }

    // -02
    v = skip(v, b'-').map_err(|rest| parse_err("-", rest, ""))?;
    let hold = v;
    let (day, rest) = getnum(v, true).ok_or_else(|| parse_err("02", hold, ""))?;
    v = rest;

    // T15
    v = skip(v, b'T').map_err(|rest| parse_err("T", rest, ""))?;
    let hold = v;
    let (hour, rest) = getnum(v, false).ok_or_else(|| parse_err("15", hold, ""))?;
    v = rest;
    if hour >= 24 {
        return Err(parse_err("15", v, ": hour out of range"));
    }

    // :04
    v = skip(v, b':').map_err(|rest| parse_err(":", rest, ""))?;
    let hold = v;
    let (minute, rest) = getnum(v, true).ok_or_else(|| parse_err("04", hold, ""))?;
    v = rest;
    if minute >= 60 {
        return Err(parse_err("04", v, ": minute out of range"));
    }

    // :05, with a fractional second the layout does not mention
    v = skip(v, b':').map_err(|rest| parse_err(":", rest, ""))?;
    let hold = v;
    let (second, rest) = getnum(v, true).ok_or_else(|| parse_err("05", hold, ""))?;
    v = rest;
    if second >= 60 {
        return Err(parse_err("05", v, ": second out of range"));
    }
    let mut nsec = 0i64;
    if v.len() >= 2 && matches!(v[0], b'.' | b',') && v[1].is_ascii_digit() {
        let n = 1 + v[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        // parseNanoseconds: at most nine digits count.
        let digits = &v[1..n.min(10)];
        let mut ns = digits
            .iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
        for _ in digits.len()..9 {
            ns *= 10;
        }
        nsec = ns;
        v = &v[n..];
    }

    // Z07:00
    let hold = v;
    let offset = if v.first() == Some(&b'Z') {
        v = &v[1..];
        0
    } else {
        if v.len() < 6 || v[3] != b':' {
            return Err(parse_err("Z07:00", hold, ""));
        }
        let sign = v[0];
        let (hour_s, min_s) = (&v[1..3], &v[4..6]);
        v = &v[6..];
        let mut bad = false;
        let hr = getnum(hour_s, true).map(|(h, _)| h);
        let mm = if hr.is_some() {
            getnum(min_s, true).map(|(m, _)| m)
        } else {
            None
        };
        if hr.is_none() || mm.is_none() {
            bad = true;
        }
        let (hr, mm) = (hr.unwrap_or(0), mm.unwrap_or(0));
        let mut range = "";
        if hr > 24 {
            range = "time zone offset hour";
        }
        if mm > 60 {
            range = "time zone offset minute";
        }
        let mut offset = (hr * 60 + mm) * 60;
        match sign {
            b'+' => {}
            b'-' => offset = -offset,
            _ => bad = true,
        }
        if !range.is_empty() {
            return Err(parse_err("Z07:00", v, &format!(": {range} out of range")));
        }
        if bad {
            return Err(parse_err("Z07:00", hold, ""));
        }
        offset
    };

    if !v.is_empty() {
        let extra = String::from_utf8_lossy(v);
        return Err(parse_err(
            "",
            v,
            &format!(": extra text: {}", time_quote(&extra)),
        ));
    }
    if day < 1 || day > days_in(month, year) {
        return Err(parse_err("", v, ": day out of range"));
    }
    let month = u32::try_from(month).unwrap_or(1);
    let day = u32::try_from(day).unwrap_or(1);
    let days = days_from_civil(year, month, day);
    let unix = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Ok(GoTime { unix, nsec, offset })
}

/// go-cty's `parseTimestamp` rewording of a `time.ParseError`.
fn cty_timestamp_error(e: &ParseErr) -> String {
    const PREFIX: &str = "not a valid RFC3339 timestamp";
    if e.layout_elem.is_empty() && e.value_elem.is_empty() && !e.message.is_empty() {
        return format!("{PREFIX}{}", e.message);
    }
    let what = match e.layout_elem {
        "2006" => "year",
        "01" => "month",
        "02" => "day of month",
        "15" => "hour",
        "04" => "minute",
        "05" => "second",
        "Z07:00" => "UTC offset",
        "T" => return format!("{PREFIX}: missing required time introducer 'T'"),
        ":" | "-" => {
            return if e.value_elem.is_empty() {
                format!(
                    "{PREFIX}: end of string where \"{}\" is expected",
                    e.layout_elem
                )
            } else {
                format!(
                    "{PREFIX}: found {} where \"{}\" is expected",
                    go_quote_bytes(&e.value_elem),
                    e.layout_elem
                )
            };
        }
        _ => "timestamp segment",
    };
    if e.value_elem.is_empty() {
        format!("{PREFIX}: end of string before {what}")
    } else {
        format!(
            "{PREFIX}: cannot use {} as {what}",
            go_quote_bytes(&e.value_elem)
        )
    }
}

/// The longest token `bufio.Scanner` (64 KiB buffer) can hand to go-cty's
/// date-format splitter, counting the byte it needs to see after the token.
const MAX_SCAN_TOKEN: usize = 64 * 1024;

/// go-cty's `splitDateFormat` at end of input: the length of the next token,
/// how many bytes the scanner had to hold to decide it, and whether it could
/// only be decided at end of input.
fn split_date_format(data: &[u8]) -> (usize, usize, bool) {
    let all = data.len();
    if data[0] == b'\'' {
        if data.len() > 1 && data[1] == b'\'' {
            return (2, 2, false);
        }
        let mut i = 1;
        while i < data.len() {
            if data[i] == b'\'' {
                if i + 1 == data.len() {
                    return (all, all, true);
                }
                if data[i + 1] == b'\'' {
                    i += 2;
                    continue;
                }
                return (i + 1, i + 2, false);
            }
            i += 1;
        }
        return (all, all, true);
    }
    if data[0].is_ascii_alphabetic() {
        return match data.iter().position(|&c| c != data[0]) {
            Some(n) => (n, n + 1, false),
            None => (all, all, true),
        };
    }
    let n = data
        .iter()
        .skip(1)
        .position(|&c| c == b'\'' || c.is_ascii_alphabetic())
        .map_or(all, |p| p + 1);
    (n, 0, false)
}

/// Renders a Terraform-style date format (go-cty's `formatdate`) for `t`.
/// Format errors refer to argument 0.
fn render_date_format(format: &str, t: GoTime) -> Result<String, FuncError> {
    let c = t.civil();
    let data = format.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(data.len());
    let mut pos = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        let (len, held, needs_eof) = split_date_format(rest);
        if held > MAX_SCAN_TOKEN || (needs_eof && held >= MAX_SCAN_TOKEN) {
            // bufio.Scanner gives up (ErrTooLong), which cty does not check.
            break;
        }
        let tok = &rest[..len];
        pos += len;
        let verb_err = |detail: &str| {
            let sep = if detail.is_empty() { "" } else { ": " };
            FuncError::arg(
                0,
                format!(
                    "invalid date format verb {}{sep}{detail}",
                    go_quote_bytes(tok)
                ),
            )
        };
        if tok[0] == b'\'' {
            if tok[tok.len() - 1] != b'\'' || tok.len() == 1 {
                return Err(FuncError::arg(0, "unterminated literal '"));
            }
            if tok.len() == 2 {
                out.push(b'\'');
            } else {
                let raw = &tok[1..tok.len() - 1];
                let mut i = 0;
                while i < raw.len() {
                    out.push(raw[i]);
                    if raw[i] == b'\'' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            continue;
        }
        if !tok[0].is_ascii_alphabetic() {
            out.extend_from_slice(tok);
            continue;
        }
        let text = match (tok[0], tok.len()) {
            (b'Y', 2) => format!("{:02}", c.year % 100),
            (b'Y', 4) => format!("{:04}", c.year),
            (b'Y', _) => return Err(verb_err("year must either be \"YY\" or \"YYYY\"")),
            (b'M', 1) => c.month.to_string(),
            (b'M', 2) => format!("{:02}", c.month),
            (b'M', 3) => MONTH_NAMES[c.month as usize - 1][..3].to_string(),
            (b'M', 4) => MONTH_NAMES[c.month as usize - 1].to_string(),
            (b'M', _) => {
                return Err(verb_err(
                    "month must be \"M\", \"MM\", \"MMM\", or \"MMMM\"",
                ));
            }
            (b'D', 1) => c.day.to_string(),
            (b'D', 2) => format!("{:02}", c.day),
            (b'D', _) => {
                return Err(verb_err("day of month must either be \"D\" or \"DD\""));
            }
            (b'E', 3) => DAY_NAMES[c.weekday][..3].to_string(),
            (b'E', 4) => DAY_NAMES[c.weekday].to_string(),
            (b'E', _) => {
                return Err(verb_err("day of week must either be \"EEE\" or \"EEEE\""));
            }
            (b'h', 1) => c.hour.to_string(),
            (b'h', 2) => format!("{:02}", c.hour),
            (b'h', _) => return Err(verb_err("24-hour must either be \"h\" or \"hh\"")),
            (b'H', n @ (1 | 2)) => {
                let h = if c.hour.is_multiple_of(12) {
                    12
                } else {
                    c.hour % 12
                };
                if n == 1 {
                    h.to_string()
                } else {
                    format!("{h:02}")
                }
            }
            (b'H', _) => return Err(verb_err("12-hour must either be \"H\" or \"HH\"")),
            (b'A' | b'a', 2) => {
                let pm = c.hour >= 12;
                match (tok[0] == b'A', pm) {
                    (true, false) => "AM",
                    (true, true) => "PM",
                    (false, false) => "am",
                    (false, true) => "pm",
                }
                .to_string()
            }
            (b'A' | b'a', _) => {
                let letter = char::from(tok[0]);
                return Err(verb_err(&format!("must be \"{letter}{letter}\"")));
            }
            (b'm', 1) => c.minute.to_string(),
            (b'm', 2) => format!("{:02}", c.minute),
            (b'm', _) => return Err(verb_err("minute must either be \"m\" or \"mm\"")),
            (b's', 1) => c.second.to_string(),
            (b's', 2) => format!("{:02}", c.second),
            (b's', _) => return Err(verb_err("second must either be \"s\" or \"ss\"")),
            (b'Z', 1) => go_zone(t.offset, true, true),
            (b'Z', 3) => match go_zone(t.offset, false, false) {
                z if z == "+0000" => "UTC".to_string(),
                z => z,
            },
            (b'Z', 4) => go_zone(t.offset, false, false),
            (b'Z', 5) => go_zone(t.offset, true, false),
            (b'Z', _) => {
                return Err(verb_err("timezone must be Z, ZZZZ, or ZZZZZ"));
            }
            _ => return Err(verb_err("")),
        };
        out.extend_from_slice(text.as_bytes());
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn formatdate(args: &[Value]) -> Result<Value, FuncError> {
    let t =
        parse_rfc3339(str_arg(args, 1)).map_err(|e| FuncError::arg(1, cty_timestamp_error(&e)))?;
    render_date_format(str_arg(args, 0), t).map(Value::String)
}

/// time's `leadingInt`: `[0-9]*` as a `uint64` no larger than 2^63.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > (1 << 63) / 10 {
            return None;
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > 1 << 63 {
            return None;
        }
        i += 1;
    }
    Some((x, &s[i..]))
}

/// time's `leadingFraction`: digits, their scale, and the rest; precision
/// beyond 2^63 is dropped silently.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let mut x: u64 = 0;
    let mut scale = 1.0f64;
    let mut overflow = false;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if !overflow {
            if x > ((1 << 63) - 1) / 10 {
                overflow = true;
            } else {
                let y = x * 10 + u64::from(s[i] - b'0');
                if y > 1 << 63 {
                    overflow = true;
                } else {
                    x = y;
                    scale *= 10.0;
                }
            }
        }
        i += 1;
    }
    (x, scale, &s[i..])
}

/// Go's `time.ParseDuration`, in nanoseconds.
fn parse_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", time_quote(orig));
    let mut s = orig.as_bytes();
    let mut d: u64 = 0;
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (mut v, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = before != s.len();
        let (mut f, mut scale, mut post) = (0u64, 1.0f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let before = s.len();
            let (ff, sc, rest) = leading_fraction(s);
            (f, scale, s) = (ff, sc, rest);
            post = before != s.len();
        }
        if !pre && !post {
            return Err(invalid());
        }
        let i = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if i == 0 {
            return Err(format!(
                "time: missing unit in duration {}",
                time_quote(orig)
            ));
        }
        let (u, rest) = s.split_at(i);
        s = rest;
        let unit: u64 = match u {
            b"ns" => 1,
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => {
                let u = std::str::from_utf8(u).unwrap_or_default();
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    time_quote(u),
                    time_quote(orig)
                ));
            }
        };
        if v > (1 << 63) / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > 1 << 63 {
                return Err(invalid());
            }
        }
        d = d.wrapping_add(v);
        if d > 1 << 63 {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((d as i64).wrapping_neg());
    }
    i64::try_from(d).map_err(|_| invalid())
}

fn timeadd(args: &[Value]) -> Result<Value, FuncError> {
    let t =
        parse_rfc3339(str_arg(args, 0)).map_err(|e| FuncError::failed(cty_timestamp_error(&e)))?;
    let d = parse_duration(str_arg(args, 1)).map_err(FuncError::failed)?;
    Ok(Value::String(format_rfc3339(t.add(d))))
}

fn timestamp(_args: &[Value]) -> Result<Value, FuncError> {
    let now = chrono::Utc::now().timestamp();
    Ok(Value::String(format_rfc3339(GoTime::utc(now))))
}

/// buildx's `formattimestamp(format, time)`: `time` is an RFC 3339 string or
/// a whole number of Unix seconds; `format` is go-cty's `formatdate` syntax,
/// or `"X"` for Unix seconds.
fn formattimestamp(args: &[Value]) -> Result<Value, FuncError> {
    let format = str_arg(args, 0);
    let t = match args.get(1) {
        Some(Value::String(s)) if format == "X" => {
            parse_rfc3339(s).map_err(|_| FuncError::arg(1, "timestamp string must be RFC3339"))?
        }
        Some(Value::String(s)) => {
            parse_rfc3339(s).map_err(|e| FuncError::arg(1, cty_timestamp_error(&e)))?
        }
        Some(Value::Number(n)) => GoTime::utc(
            exact_i64(*n).ok_or_else(|| FuncError::arg(1, "unix timestamp must be an integer"))?,
        ),
        _ => {
            return Err(FuncError::arg(
                1,
                "time must be an RFC3339 timestamp string or a unix timestamp integer",
            ));
        }
    };
    if format == "X" {
        return Ok(Value::String(t.unix.to_string()));
    }
    render_date_format(format, t).map(Value::String)
}

/// buildx's `unixtimestampparse(unix_timestamp)`.
fn unixtimestampparse(args: &[Value]) -> Result<Value, FuncError> {
    let secs = args
        .first()
        .and_then(Value::as_number)
        .and_then(exact_i64)
        .ok_or_else(|| FuncError::arg(0, "unix timestamp must be an integer"))?;
    let t = GoTime::utc(secs);
    let c = t.civil();
    let (iso_year, iso_week) = t.iso_week();
    let num = |n: i64| Value::Number(n as f64);
    let mut obj = BTreeMap::new();
    obj.insert("year".to_string(), num(c.year));
    obj.insert("year_day".to_string(), num(c.yday));
    obj.insert("day".to_string(), num(i64::from(c.day)));
    obj.insert("month".to_string(), num(i64::from(c.month)));
    obj.insert(
        "month_name".to_string(),
        Value::string(MONTH_NAMES[c.month as usize - 1]),
    );
    obj.insert("weekday".to_string(), num(c.weekday as i64));
    obj.insert(
        "weekday_name".to_string(),
        Value::string(DAY_NAMES[c.weekday]),
    );
    obj.insert("hour".to_string(), num(i64::from(c.hour)));
    obj.insert("minute".to_string(), num(i64::from(c.minute)));
    obj.insert("second".to_string(), num(i64::from(c.second)));
    obj.insert("rfc3339".to_string(), Value::String(format_rfc3339(t)));
    obj.insert("iso_year".to_string(), num(iso_year));
    obj.insert("iso_week".to_string(), num(iso_week));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::super::FuncError;
    use super::super::testkit::{arg_err, call, failed, n, ok, s};
    use crate::value::Value;

    fn ok_str(name: &str, args: Vec<Value>) -> String {
        match ok(name, args.clone()) {
            Value::String(v) => v,
            other => panic!("{name}({args:?}) returned {other:?}, not a string"),
        }
    }
    fn strings(v: Value) -> Vec<String> {
        match v {
            Value::List(_, items) => items
                .into_iter()
                .map(|i| i.as_str().unwrap_or_default().to_string())
                .collect(),
            other => panic!("not a list: {other:?}"),
        }
    }

    // ---------------------------------------------------------- base64, url

    #[test]
    fn base64encode_vectors() {
        assert_eq!(ok_str("base64encode", vec![s("Hello")]), "SGVsbG8=");
        assert_eq!(ok_str("base64encode", vec![s("")]), "");
        assert_eq!(ok_str("base64encode", vec![s("ü")]), "w7w=");
        // HCL converts a number argument to a string first.
        assert_eq!(ok_str("base64encode", vec![n(12.0)]), "MTI=");
    }

    #[test]
    fn base64decode_vectors() {
        assert_eq!(ok_str("base64decode", vec![s("SGVsbG8=")]), "Hello");
        assert_eq!(ok_str("base64decode", vec![s("")]), "");
        assert_eq!(ok_str("base64decode", vec![s("w7w=")]), "ü");
        // Go skips CR and LF anywhere and accepts non-zero trailing bits.
        assert_eq!(ok_str("base64decode", vec![s("SGVs\r\nbG8=\n")]), "Hello");
        assert_eq!(ok_str("base64decode", vec![s("SGVsbG9=")]), "Hello");
    }

    #[test]
    fn base64decode_errors() {
        for bad in [
            "SGVsbG8",
            "SGVsbG8==",
            "SGVs bG8=",
            "SGVsbG8=SGVsbG8=",
            "@@@@",
        ] {
            assert_eq!(
                failed("base64decode", vec![s(bad)]),
                format!("failed to decode base64 data '{bad}'")
            );
        }
        assert_eq!(
            failed("base64decode", vec![s("/w==")]),
            "the result of decoding the the provided string is not valid UTF-8"
        );
        assert!(matches!(
            call("base64decode", vec![]),
            Err(FuncError::Arity { .. })
        ));
    }

    #[test]
    fn urlencode_is_query_escape() {
        let cases = [
            ("abc123-_", "abc123-_"),
            (
                "foo:bar@localhost?foo=bar&bar=baz",
                "foo%3Abar%40localhost%3Ffoo%3Dbar%26bar%3Dbaz",
            ),
            (
                "mailto:email?subject=this+is+my+subject",
                "mailto%3Aemail%3Fsubject%3Dthis%2Bis%2Bmy%2Bsubject",
            ),
            ("foo/bar", "foo%2Fbar"),
            ("a b~.c", "a+b~.c"),
            ("ü\n", "%C3%BC%0A"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(ok_str("urlencode", vec![s(input)]), want, "{input:?}");
        }
    }

    // ---------------------------------------------------------- hashes

    #[test]
    fn hash_vectors() {
        let cases = [
            ("md5", "tada", "ce47d07243bb6eaf5e1322c81baf9bbf"),
            ("md5", " tada ", "aadf191a583e53062de2d02c008141c4"),
            ("md5", "", "d41d8cd98f00b204e9800998ecf8427e"),
            ("sha1", "test", "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"),
            ("sha1", "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            (
                "sha256",
                "test",
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            ),
            (
                "sha256",
                "",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                "sha512",
                "test",
                "ee26b0dd4af7e749aa1a8ee3c10ae9923f618980772e473f8819a5d4940e0db27ac185f8a0e1d5f84f88bc887fd67b143732c304cc5fa9ad8e6f57f50028a8ff",
            ),
        ];
        for (f, input, want) in cases {
            assert_eq!(ok_str(f, vec![s(input)]), want, "{f}({input:?})");
        }
        assert!(matches!(
            call("sha256", vec![s("a"), s("b")]),
            Err(FuncError::Arity { .. })
        ));
    }

    #[test]
    fn bcrypt_hashes_verify() {
        let h = ok_str("bcrypt", vec![s("test")]);
        assert!(h.starts_with("$2a$10$"), "{h}");
        assert!(bcrypt::verify("test", &h).unwrap());
        let h = ok_str("bcrypt", vec![s("test"), n(5.0)]);
        assert!(h.starts_with("$2a$05$"), "{h}");
        assert!(bcrypt::verify("test", &h).unwrap());
        assert!(!bcrypt::verify("other", &h).unwrap());
        // Costs below the minimum fall back to the default, as in Go.
        assert!(ok_str("bcrypt", vec![s("x"), n(3.0)]).starts_with("$2a$10$"));
        assert!(ok_str("bcrypt", vec![s("x"), n(-7.0)]).starts_with("$2a$10$"));
        // The cost converts from a string under HCL's rules.
        assert!(ok_str("bcrypt", vec![s("x"), s("4")]).starts_with("$2a$04$"));
        // 72 bytes is the limit.
        let long = "a".repeat(72);
        let h = ok_str("bcrypt", vec![s(&long), n(4.0)]);
        assert!(bcrypt::verify(&long, &h).unwrap());
    }

    #[test]
    fn bcrypt_errors() {
        assert_eq!(
            failed("bcrypt", vec![s("test"), n(10.0), n(11.0)]),
            "bcrypt() takes no more than two arguments"
        );
        assert_eq!(
            failed("bcrypt", vec![s("test"), n(32.0)]),
            "error occured generating password crypto/bcrypt: cost 32 is outside allowed range (4,31)"
        );
        assert_eq!(
            failed("bcrypt", vec![s("test"), n(1.5)]),
            super::GOCTY_INT_ERR
        );
        assert_eq!(
            failed("bcrypt", vec![s("test"), n(1e30)]),
            super::GOCTY_INT_ERR
        );
        assert_eq!(
            failed("bcrypt", vec![s(&"a".repeat(73))]),
            "error occured generating password bcrypt: password length exceeds 72 bytes"
        );
        assert!(matches!(
            call("bcrypt", vec![s("x"), s("ten")]),
            Err(FuncError::Arg { index: 1, .. })
        ));
    }

    // ---------------------------------------------------------- rsadecrypt

    /// go-cty-funcs' crypto test vectors.
    const CIPHER_BASE64: &str = "eczGaDhXDbOFRZGhjx2etVzWbRqWDlmq0bvNt284JHVbwCgObiuyX9uV0LSAMY707IEgMkExJqXmsB4OWKxvB7epRB9G/3+F+pcrQpODlDuL9oDUAsa65zEpYF0Wbn7Oh7nrMQncyUPpyr9WUlALl0gRWytOA23S+y5joa4M34KFpawFgoqTu/2EEH4Xl1zo+0fy73fEto+nfkUY+meuyGZ1nUx/+DljP7ZqxHBFSlLODmtuTMdswUbHbXbWneW51D7Jm7xB8nSdiA2JQNK5+Sg5x8aNfgvFTt/m2w2+qpsyFa5Wjeu6fZmXSl840CA07aXbk9vN4I81WmJyblD/ZA==";
    const PRIVATE_KEY: &str = "
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAgUElV5mwqkloIrM8ZNZ72gSCcnSJt7+/Usa5G+D15YQUAdf9
c1zEekTfHgDP+04nw/uFNFaE5v1RbHaPxhZYVg5ZErNCa/hzn+x10xzcepeS3KPV
Xcxae4MR0BEegvqZqJzN9loXsNL/c3H/B+2Gle3hTxjlWFb3F5qLgR+4Mf4ruhER
1v6eHQa/nchi03MBpT4UeJ7MrL92hTJYLdpSyCqmr8yjxkKJDVC2uRrr+sTSxfh7
r6v24u/vp/QTmBIAlNPgadVAZw17iNNb7vjV7Gwl/5gHXonCUKURaV++dBNLrHIZ
pqcAM8wHRph8mD1EfL9hsz77pHewxolBATV+7QIDAQABAoIBAC1rK+kFW3vrAYm3
+8/fQnQQw5nec4o6+crng6JVQXLeH32qXShNf8kLLG/Jj0vaYcTPPDZw9JCKkTMQ
0mKj9XR/5DLbBMsV6eNXXuvJJ3x4iKW5eD9WkLD4FKlNarBRyO7j8sfPTqXW7uat
NxWdFH7YsSRvNh/9pyQHLWA5OituidMrYbc3EUx8B1GPNyJ9W8Q8znNYLfwYOjU4
Wv1SLE6qGQQH9Q0WzA2WUf8jklCYyMYTIywAjGb8kbAJlKhmj2t2Igjmqtwt1PYc
pGlqbtQBDUiWXt5S4YX/1maIQ/49yeNUajjpbJiH3DbhJbHwFTzP3pZ9P9GHOzlG
kYR+wSECgYEAw/Xida8kSv8n86V3qSY/I+fYQ5V+jDtXIE+JhRnS8xzbOzz3v0WS
Oo5H+o4nJx5eL3Ghb3Gcm0Jn46dHrxinHbm+3RjXv/X6tlbxIYjRSQfHOTSMCTvd
qcliF5vC6RCLXuc7R+IWR1Ky6eDEZGtrvt3DyeYABsp9fRUFR/6NluUCgYEAqNsw
1aSl7WJa27F0DoJdlU9LWerpXcazlJcIdOz/S9QDmSK3RDQTdqfTxRmrxiYI9LEs
mkOkvzlnnOBMpnZ3ZOU5qIRfprecRIi37KDAOHWGnlC0EWGgl46YLb7/jXiWf0AG
Y+DfJJNd9i6TbIDWu8254/erAS6bKMhW/3q7f2kCgYAZ7Id/BiKJAWRpqTRBXlvw
BhXoKvjI2HjYP21z/EyZ+PFPzur/lNaZhIUlMnUfibbwE9pFggQzzf8scM7c7Sf+
mLoVSdoQ/Rujz7CqvQzi2nKSsM7t0curUIb3lJWee5/UeEaxZcmIufoNUrzohAWH
BJOIPDM4ssUTLRq7wYM9uQKBgHCBau5OP8gE6mjKuXsZXWUoahpFLKwwwmJUp2vQ
pOFPJ/6WZOlqkTVT6QPAcPUbTohKrF80hsZqZyDdSfT3peFx4ZLocBrS56m6NmHR
UYHMvJ8rQm76T1fryHVidz85g3zRmfBeWg8yqT5oFg4LYgfLsPm1gRjOhs8LfPvI
OLlRAoGBAIZ5Uv4Z3s8O7WKXXUe/lq6j7vfiVkR1NW/Z/WLKXZpnmvJ7FgxN4e56
RXT7GwNQHIY8eDjDnsHxzrxd+raOxOZeKcMHj3XyjCX3NHfTscnsBPAGYpY/Wxzh
T8UYnFu6RzkixElTf2rseEav7rkdKkI3LAeIZy7B0HulKKsmqVQ7
-----END RSA PRIVATE KEY-----
";
    const WRONG_PRIVATE_KEY: &str = "
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAlrCgnEVgmNKCq7KPc+zUU5IrxPu1ClMNJS7RTsTPEkbwe5SB
p+6V6WtCbD/X/lDRRGbOENChh1Phulb7lViqgrdpHydgsrKoS5ah3DfSIxLFLE00
9Yo4TCYwgw6+s59j16ZAFVinaQ9l6Kmrb2ll136hMrz8QKh+qw+onOLd38WFgm+W
ZtUqSXf2LANzfzzy4OWFNyFqKaCAolSkPdTS9Nz+svtScvp002DQp8OdP1AgPO+l
o5N3M38Fftapwg0pCtJ5Zq0NRWIXEonXiTEMA6zy3gEZVOmDxoIFUWnmrqlMJLFy
5S6LDrHSdqJhCxDK6WRZj43X9j8spktk3eGhMwIDAQABAoIBAAem8ID/BOi9x+Tw
LFi2rhGQWqimH4tmrEQ3HGnjlKBY+d1MrUjZ1MMFr1nP5CgF8pqGnfA8p/c3Sz8r
K5tp5T6+EZiDZ2WrrOApxg5ox0MAsQKO6SGO40z6o3wEQ6rbbTaGOrraxaWQIpyu
AQanU4Sd6ZGqByVBaS1GnklZO+shCHqw73b7g1cpLEmFzcYnKHYHlUUIsstMe8E1
BaCY0CH7JbWBjcbiTnBVwIRZuu+EjGiQuhTilYL2OWqoMVg1WU0L2IFpR8lkf/2W
SBx5J6xhwbBGASOpM+qidiN580GdPzGhWYSqKGroHEzBm6xPSmV1tadNA26WFG4p
pthLiAECgYEA5BsPRpNYJAQLu5B0N7mj9eEp0HABVEgL/MpwiImjaKdAwp78HM64
IuPvJxs7r+xESiIz4JyjR8zrQjYOCKJsARYkmNlEuAz0SkHabCw1BdEBwUhjUGVB
efoERK6GxfAoNqmSDwsOvHFOtsmDIlbHmg7G2rUxNVpeou415BSB0B8CgYEAqR4J
YHKk2Ibr9rU+rBU33TcdTGw0aAkFNAVeqM9j0haWuFXmV3RArgoy09lH+2Ha6z/g
fTX2xSDAWV7QUlLOlBRIhurPAo2jO2yCrGHPZcWiugstrR2hTTInigaSnCmK3i7F
6sYmL3S7K01IcVNxSlWvGijtClT92Cl2WUCTfG0CgYAiEjyk4QtQTd5mxLvnOu5X
oqs5PBGmwiAwQRiv/EcRMbJFn7Oupd3xMDSflbzDmTnWDOfMy/jDl8MoH6TW+1PA
kcsjnYhbKWwvz0hN0giVdtOZSDO1ZXpzOrn6fEsbM7T9/TQY1SD9WrtUKCNTNL0Z
sM1ZC6lu+7GZCpW4HKwLJwKBgQCRT0yxQXBg1/UxwuO5ynV4rx2Oh76z0WRWIXMH
S0MyxdP1SWGkrS/SGtM3cg/GcHtA/V6vV0nUcWK0p6IJyjrTw2XZ/zGluPuTWJYi
9dvVT26Vunshrz7kbH7KuwEICy3V4IyQQHeY+QzFlR70uMS0IVFWAepCoWqHbIDT
CYhwNQKBgGPcLXmjpGtkZvggl0aZr9LsvCTckllSCFSI861kivL/rijdNoCHGxZv
dfDkLTLcz9Gk41rD9Gxn/3sqodnTAc3Z2PxFnzg1Q/u3+x6YAgBwI/g/jE2xutGW
H7CurtMwALQ/n/6LUKFmjRZjqbKX9SO2QSaC3grd6sY9Tu+bZjLe
-----END RSA PRIVATE KEY-----
";
    /// A 512-bit key and "hi" encrypted to it (generated with openssl).
    const SMALL_KEY: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIBOwIBAAJBAKOq35CCNdErVrhLw3h9TmGTEHF25S+RcgXW4oRFjBESM10ecXeE
VTxexdR6kPNVUZB5irzHYzENSNOofELULlECAwEAAQJAd5J3ExSOTOrkyHBRts2V
XiQbd0nt1vrj2vBLPWeyFSWTQzZksx04MkQmDAXFVlG409jaMsiKacuQopDCZSlp
oQIhANnrnyz75YQgRt2MS2DJ8nLrGppB5qcmUHELzsyRv92TAiEAwERRwcI6tXsS
AL9fupkSt2+CiZcNEB9SlIzxkfmlUwsCIQDE4Pvw/y7vfN2pQRvEuQ6ixkdFgC5r
atEYIMvXxAHsowIgZGjJkbkP1AtL4ZwQMHEUtzvDHnwGVG8nP3FED4oi7vUCIQCY
QigxP/dyxUMPJ1v+Zkmy8MbY0imNO8svpB4SaJCICg==
-----END RSA PRIVATE KEY-----
";
    const SMALL_CIPHER: &str =
        "Mhkh7uxtRI4cCmrjYefpv8bTns2lXd9ySLsqreHcXoIndp13Rh2n+OITydnHqmv+4IH2yyz42lqwHlmBPxeAwQ==";
    const EC_KEY: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIFWm/n6H/KPEERSZbdPjiZYyArH8j5jg/ksaLmjr8pOooAoGCCqGSM49
AwEHoUQDQgAE3Rk33CGyAamOCl+ju65kI7KHLVGbFx0wUUaCjSm2F2WvrMg2L3KZ
8wyZ9ZScOMHowMjhLb2D4PvlpTWmGdSEGQ==
-----END EC PRIVATE KEY-----
";

    #[test]
    fn rsadecrypt_decrypts() {
        assert_eq!(
            ok_str("rsadecrypt", vec![s(CIPHER_BASE64), s(PRIVATE_KEY)]),
            "message"
        );
        // pem.Decode skips leading text, accepts CRLF line ends and ignores
        // line breaks inside the base64 ciphertext.
        let crlf = format!("some text\r\n{}", PRIVATE_KEY.replace('\n', "\r\n"));
        let wrapped = format!("{}\n{}", &CIPHER_BASE64[..40], &CIPHER_BASE64[40..]);
        assert_eq!(ok_str("rsadecrypt", vec![s(&wrapped), s(&crlf)]), "message");
    }

    #[test]
    fn rsadecrypt_errors() {
        let decryption = "crypto/rsa: decryption error";
        assert_eq!(
            failed("rsadecrypt", vec![s(CIPHER_BASE64), s(WRONG_PRIVATE_KEY)]),
            decryption
        );
        assert_eq!(
            failed("rsadecrypt", vec![s(""), s(PRIVATE_KEY)]),
            decryption
        );
        // Longer than the modulus.
        let long = base64::Engine::encode(&super::GO_STD_BASE64, [1u8; 300]);
        assert_eq!(
            failed("rsadecrypt", vec![s(&long), s(PRIVATE_KEY)]),
            decryption
        );
        for key in ["bad key", "", "-----BEGIN RSA PRIVATE KEY-----\n"] {
            assert_eq!(
                failed("rsadecrypt", vec![s(CIPHER_BASE64), s(key)]),
                "failed to parse key: no key found"
            );
        }
        assert_eq!(
            failed("rsadecrypt", vec![s("bad cipher"), s(PRIVATE_KEY)]),
            "failed to decode input \"bad cipher\": cipher text must be base64-encoded"
        );
        let encrypted = PRIVATE_KEY.replace(
            "KEY-----\nMIIE",
            "KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nMIIE",
        );
        assert_eq!(
            failed("rsadecrypt", vec![s(CIPHER_BASE64), s(&encrypted)]),
            "failed to parse key: password protected keys are not supported. Please decrypt the key prior to use"
        );
        assert_eq!(
            failed("rsadecrypt", vec![s(SMALL_CIPHER), s(SMALL_KEY)]),
            "crypto/rsa: 512-bit keys are insecure (see https://go.dev/pkg/crypto/rsa#hdr-Minimum_key_size)"
        );
        assert_eq!(
            failed("rsadecrypt", vec![s(CIPHER_BASE64), s(EC_KEY)]),
            "x509: failed to parse private key (use ParseECPrivateKey instead for this key format)"
        );
        let pkcs8 = "-----BEGIN PRIVATE KEY-----\nMAoCAQAwAwYBAAQA\n-----END PRIVATE KEY-----\n";
        assert_eq!(
            failed("rsadecrypt", vec![s(CIPHER_BASE64), s(pkcs8)]),
            "x509: failed to parse private key (use ParsePKCS8PrivateKey instead for this key format)"
        );
        let garbage = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        assert!(failed("rsadecrypt", vec![s(CIPHER_BASE64), s(garbage)]).starts_with("asn1: "),);
        // A block whose END type does not match is skipped entirely.
        let mismatched = PRIVATE_KEY.replace("END RSA", "END EC");
        assert_eq!(
            failed("rsadecrypt", vec![s(CIPHER_BASE64), s(&mismatched)]),
            "failed to parse key: no key found"
        );
    }

    // ---------------------------------------------------------- uuid

    #[test]
    fn uuidv4_is_random_v4() {
        let a = ok_str("uuidv4", vec![]);
        let b = ok_str("uuidv4", vec![]);
        assert_ne!(a, b);
        for u in [&a, &b] {
            assert_eq!(u.len(), 36);
            let bytes = u.as_bytes();
            for i in [8, 13, 18, 23] {
                assert_eq!(bytes[i], b'-', "{u}");
            }
            assert_eq!(bytes[14], b'4', "{u}");
            assert!(matches!(bytes[19], b'8' | b'9' | b'a' | b'b'), "{u}");
            assert_eq!(u.to_lowercase(), **u);
        }
        assert!(matches!(
            call("uuidv4", vec![s("x")]),
            Err(FuncError::Arity { .. })
        ));
    }

    #[test]
    fn uuidv5_vectors() {
        let cases = [
            ("dns", "faa898db-9b9d-5b75-86a9-149e7bb8e3b8"),
            ("url", "2c1ff6b4-211f-577e-94de-d978b0caa16e"),
            ("oid", "61eeea26-5176-5288-87fc-232d6ed30d2f"),
            ("x500", "7e12415e-f7c9-57c3-9e43-52dc9950d264"),
            (
                "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
                "faa898db-9b9d-5b75-86a9-149e7bb8e3b8",
            ),
            (
                "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}",
                "faa898db-9b9d-5b75-86a9-149e7bb8e3b8",
            ),
            (
                "URN:uuid:6BA7B810-9DAD-11D1-80B4-00C04FD430C8",
                "faa898db-9b9d-5b75-86a9-149e7bb8e3b8",
            ),
            (
                "6ba7b8109dad11d180b400c04fd430c8",
                "faa898db-9b9d-5b75-86a9-149e7bb8e3b8",
            ),
        ];
        for (ns, want) in cases {
            assert_eq!(ok_str("uuidv5", vec![s(ns), s("tada")]), want, "{ns}");
        }
    }

    #[test]
    fn uuidv5_errors() {
        let cases = [
            ("tada", "invalid UUID length: 4"),
            ("", "invalid UUID length: 0"),
            (
                "6ba7b810x9dad-11d1-80b4-00c04fd430c8",
                "invalid UUID format",
            ),
            (
                "6ba7b810-9dad-11d1-80b4-00c04fd430cg",
                "invalid UUID format",
            ),
            (
                "urx:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8",
                "invalid urn prefix: \"urx:uuid:\"",
            ),
            ("6ba7b8109dad11d180b400c04fd430cz", "invalid UUID format"),
        ];
        for (ns, err) in cases {
            assert_eq!(
                failed("uuidv5", vec![s(ns), s("tada")]),
                format!("uuidv5() doesn't support namespace {ns} ({err})")
            );
        }
    }

    // ---------------------------------------------------------- cidr

    #[test]
    fn cidrhost_vectors() {
        let cases = [
            ("192.168.1.0/24", 5.0, "192.168.1.5"),
            ("192.168.1.0/24", -5.0, "192.168.1.251"),
            ("192.168.1.0/24", -256.0, "192.168.1.0"),
            ("10.12.112.0/20", 16.0, "10.12.112.16"),
            ("10.12.112.0/20", 268.0, "10.12.113.12"),
            ("10.0.0.0/8", -1.0, "10.255.255.255"),
            ("10.1.2.3/32", 0.0, "10.1.2.3"),
            ("fd00:fd12:3456:7890::/56", 16.0, "fd00:fd12:3456:7800::10"),
            ("fd00:fd12:3456:7890::/56", 34.0, "fd00:fd12:3456:7800::22"),
            // go-cidr v1.0.1: with 64+ host bits a negative number stays
            // negative and is ORed in two's complement (big.Int), leaving
            // its magnitude.
            ("fd00::/64", -1.0, "::1"),
            // go-cidr v1.0.1 numbers an IPv4-mapped prefix as 32 bits wide
            // but shifts within the 128-bit address.
            ("::ffff:192.168.0.0/112", 5.0, "0:5::ffff:c0a8:0"),
        ];
        for (prefix, num, want) in cases {
            assert_eq!(
                ok_str("cidrhost", vec![s(prefix), n(num)]),
                want,
                "cidrhost({prefix}, {num})"
            );
        }
    }

    #[test]
    fn cidrhost_errors() {
        assert_eq!(
            failed("cidrhost", vec![s("192.168.1.0/30"), n(255.0)]),
            "prefix of 30 does not accommodate a host numbered 255"
        );
        assert_eq!(
            failed("cidrhost", vec![s("192.168.1.0/30"), n(-255.0)]),
            "prefix of 30 does not accommodate a host numbered -251"
        );
        assert_eq!(
            failed("cidrhost", vec![s("not-a-cidr"), n(6.0)]),
            "invalid CIDR expression: invalid CIDR address: not-a-cidr"
        );
        for bad in [
            "10.256.0.0/8",
            "10.0.0.0/33",
            "10.0.0.0/",
            "10.0.0.0/-1",
            "10.0.0.0/8/8",
            "010.0.0.0/8",
            "fe80::1%eth0/64",
            "::/129",
            "10.0.0.0",
        ] {
            assert_eq!(
                failed("cidrhost", vec![s(bad), n(1.0)]),
                format!("invalid CIDR expression: invalid CIDR address: {bad}")
            );
        }
        assert_eq!(
            failed("cidrhost", vec![s("10.0.0.0/8"), n(1.5)]),
            super::GOCTY_INT_ERR
        );
        // The host number is checked before the prefix.
        assert_eq!(
            failed("cidrhost", vec![s("nope"), n(1.5)]),
            super::GOCTY_INT_ERR
        );
    }

    #[test]
    fn cidrnetmask_vectors() {
        let cases = [
            ("192.168.1.0/24", "255.255.255.0"),
            ("192.168.1.0/32", "255.255.255.255"),
            ("0.0.0.0/0", "0.0.0.0"),
            ("10.0.0.0/010", "255.192.0.0"),
            ("1::/64", "ffff:ffff:ffff:ffff::"),
            ("::/0", "::"),
            (
                "::ffff:10.0.0.0/104",
                "ffff:ffff:ffff:ffff:ffff:ffff:ff00:0",
            ),
        ];
        for (prefix, want) in cases {
            assert_eq!(ok_str("cidrnetmask", vec![s(prefix)]), want, "{prefix}");
        }
        assert_eq!(
            failed("cidrnetmask", vec![s("110.256.0.0/8")]),
            "invalid CIDR expression: invalid CIDR address: 110.256.0.0/8"
        );
    }

    #[test]
    fn cidrsubnet_vectors() {
        let cases = [
            ("192.168.2.0/20", 4.0, 6.0, "192.168.6.0/24"),
            ("fe80::/48", 16.0, 6.0, "fe80:0:0:6::/64"),
            ("::ffff:192.168.0.0/112", 8.0, 6.0, "192.168.6.0/24"),
            ("172.16.0.0/12", 4.0, 2.0, "172.18.0.0/16"),
            ("10.1.2.0/24", 4.0, 15.0, "10.1.2.240/28"),
            (
                "fd00:fd12:3456:7890::/56",
                16.0,
                162.0,
                "fd00:fd12:3456:7800:a200::/72",
            ),
            ("10.0.0.0/8", 0.0, 0.0, "10.0.0.0/8"),
            ("10.0.0.0/8", 24.0, 16_777_215.0, "10.255.255.255/32"),
            // go-cidr v1.0.1 accepts negative newbits.
            ("10.0.0.0/8", -4.0, 0.0, "10.0.0.0/4"),
            ("10.0.0.0/8", -4.0, 1.0, "26.0.0.0/4"),
            ("10.0.0.0/8", -9.0, 0.0, "<nil>"),
        ];
        for (prefix, bits, num, want) in cases {
            assert_eq!(
                ok_str("cidrsubnet", vec![s(prefix), n(bits), n(num)]),
                want,
                "cidrsubnet({prefix}, {bits}, {num})"
            );
        }
    }

    #[test]
    fn cidrsubnet_errors() {
        assert_eq!(
            failed("cidrsubnet", vec![s("192.168.0.0/30"), n(4.0), n(6.0)]),
            "insufficient address space to extend prefix of 30 by 4"
        );
        assert_eq!(
            failed("cidrsubnet", vec![s("192.168.0.0/24"), n(2.0), n(16.0)]),
            "prefix extension of 2 does not accommodate a subnet numbered 16"
        );
        assert_eq!(
            failed("cidrsubnet", vec![s("192.168.0.0/24"), n(4.0), n(-1.0)]),
            "prefix extension of 4 does not accommodate a subnet numbered -1"
        );
        assert_eq!(
            failed("cidrsubnet", vec![s("192.168.0.0/168"), n(2.0), n(1.0)]),
            "invalid CIDR expression: invalid CIDR address: 192.168.0.0/168"
        );
        assert_eq!(
            failed("cidrsubnet", vec![s("fe80::/48"), n(33.0), n(0.0)]),
            "may not extend prefix by more than 32 bits"
        );
        assert_eq!(
            failed("cidrsubnet", vec![s("fe80::/48"), n(1.5), n(0.0)]),
            super::GOCTY_INT_ERR
        );
        assert_eq!(
            failed("cidrsubnet", vec![s("fe80::/48"), n(1.0), n(0.5)]),
            super::GOCTY_INT_ERR
        );
        // Where go-cidr v1.0.1 would index outside the address and panic.
        assert_eq!(
            failed("cidrsubnet", vec![s("10.0.0.0/8"), n(-10.0), n(1.0)]),
            "panic in function implementation: runtime error: index out of range [-1]"
        );
        assert!(call("cidrsubnet", vec![s("10.0.0.0/8"), n(-9e18), n(-5.0)]).is_err());
    }

    #[test]
    fn cidrsubnets_vectors() {
        let v = ok(
            "cidrsubnets",
            [3.0, 3.0, 3.0, 4.0, 4.0, 4.0, 7.0, 7.0, 7.0]
                .into_iter()
                .map(n)
                .fold(vec![s("10.0.0.0/21")], |mut acc, x| {
                    acc.push(x);
                    acc
                }),
        );
        assert_eq!(
            strings(v),
            [
                "10.0.0.0/24",
                "10.0.1.0/24",
                "10.0.2.0/24",
                "10.0.3.0/25",
                "10.0.3.128/25",
                "10.0.4.0/25",
                "10.0.4.128/28",
                "10.0.4.144/28",
                "10.0.4.160/28",
            ]
        );
        let v = ok(
            "cidrsubnets",
            vec![s("10.1.0.0/16"), n(4.0), n(4.0), n(8.0), n(4.0)],
        );
        assert_eq!(
            strings(v),
            [
                "10.1.0.0/20",
                "10.1.16.0/20",
                "10.1.32.0/24",
                "10.1.48.0/20"
            ]
        );
        let v = ok(
            "cidrsubnets",
            vec![
                s("fd00:fd12:3456:7890::/56"),
                n(16.0),
                n(16.0),
                n(16.0),
                n(32.0),
            ],
        );
        assert_eq!(
            strings(v),
            [
                "fd00:fd12:3456:7800::/72",
                "fd00:fd12:3456:7800:100::/72",
                "fd00:fd12:3456:7800:200::/72",
                "fd00:fd12:3456:7800:300::/88",
            ]
        );
        let v = ok("cidrsubnets", vec![s("10.0.0.0/8")]);
        assert_eq!(v.ty(), crate::value::Type::list(crate::value::Type::String));
        assert!(strings(v).is_empty());
        let v = ok("cidrsubnets", vec![s("10.0.0.0/8"), n(1.0), n(1.0)]);
        assert_eq!(strings(v), ["10.0.0.0/9", "10.128.0.0/9"]);
    }

    #[test]
    fn cidrsubnets_errors() {
        let cases: [(&str, Vec<f64>, usize, &str); 6] = [
            (
                "10.0.0.0/30",
                vec![1.0, 3.0],
                2,
                "would extend prefix to 33 bits, which is too long for an IPv4 address",
            ),
            (
                "10.0.0.0/8",
                vec![1.0, 1.0, 1.0],
                3,
                "not enough remaining address space for a subnet with a prefix of 9 bits after 10.128.0.0/9",
            ),
            (
                "10.0.0.0/8",
                vec![1.0, 0.0],
                2,
                "must extend prefix by at least one bit",
            ),
            (
                "10.0.0.0/8",
                vec![1.0, -1.0],
                2,
                "must extend prefix by at least one bit",
            ),
            (
                "fe80::/48",
                vec![1.0, 33.0],
                2,
                "may not extend prefix by more than 32 bits",
            ),
            ("10.0.0.0/8", vec![1.0, 2.5], 2, super::GOCTY_INT_ERR),
        ];
        for (prefix, bits, index, msg) in cases {
            let mut args = vec![s(prefix)];
            args.extend(bits.iter().copied().map(n));
            assert_eq!(
                arg_err("cidrsubnets", args),
                (index, msg.to_string()),
                "{prefix} {bits:?}"
            );
        }
        assert_eq!(
            arg_err("cidrsubnets", vec![s("nope"), n(1.0)]),
            (
                0,
                "invalid CIDR expression: invalid CIDR address: nope".to_string()
            )
        );
        assert_eq!(
            arg_err(
                "cidrsubnets",
                vec![s("255.255.255.0/24"), n(1.0), n(1.0), n(1.0)]
            )
            .0,
            3
        );
        // go-cidr sees the address space roll over when the first subnet of
        // 0.0.0.0/0 follows 255.255.255.255.
        assert_eq!(
            arg_err("cidrsubnets", vec![s("0.0.0.0/0"), n(1.0)]),
            (
                1,
                "not enough remaining address space for a subnet with a prefix of 1 bits after 128.0.0.0/1"
                    .to_string()
            )
        );
        // go-cidr v1.0.1 steps an IPv4-mapped prefix as a 4-byte address
        // with a 128-bit prefix length and never finds room.
        assert_eq!(
            arg_err("cidrsubnets", vec![s("::ffff:10.0.0.0/104"), n(8.0)]),
            (
                1,
                "not enough remaining address space for a subnet with a prefix of 112 bits after <nil>"
                    .to_string()
            )
        );
    }

    // ---------------------------------------------------------- formatdate

    #[test]
    fn formatdate_vectors() {
        let ts = "2006-01-02T15:04:05Z";
        let cases = [
            ("", ""),
            ("YYYY-MM-DD", "2006-01-02"),
            ("EEE, MMM D ''YY", "Mon, Jan 2 '06"),
            ("hh:mm:ss", "15:04:05"),
            ("H 'o''clock' AA", "3 o'clock PM"),
            ("H 'o''clock'", "3 o'clock"),
            ("hh:mm:ssZZZZ", "15:04:05+0000"),
            ("hh:mm:ssZZZZZ", "15:04:05+00:00"),
            ("MMMM", "January"),
            ("EEEE", "Monday"),
            ("aa", "pm"),
            ("YYYY-MM-DD'T'hh:mm:ssZ", "2006-01-02T15:04:05Z"),
            ("DD MMM YYYY hh:mm ZZZ", "02 Jan 2006 15:04 UTC"),
            (
                "EEEE, DD-MMM-YY hh:mm:ss ZZZ",
                "Monday, 02-Jan-06 15:04:05 UTC",
            ),
            (
                "EEE, DD MMM YYYY hh:mm:ss ZZZ",
                "Mon, 02 Jan 2006 15:04:05 UTC",
            ),
            ("M/D h:m:s", "1/2 15:4:5"),
            ("HH", "03"),
            ("YYYY年MM月", "2006年01月"),
            ("'abc''", "abc'"),
            ("''", "'"),
            ("'it''s' YY", "it's 06"),
            ("[D]", "[2]"),
        ];
        for (format, want) in cases {
            assert_eq!(
                ok_str("formatdate", vec![s(format), s(ts)]),
                want,
                "{format:?}"
            );
        }
    }

    #[test]
    fn formatdate_zones_and_clock() {
        let f = |format: &str, ts: &str| ok_str("formatdate", vec![s(format), s(ts)]);
        assert_eq!(
            f("Z ZZZ ZZZZ ZZZZZ", "2006-01-02T15:04:05+05:30"),
            "+05:30 +0530 +0530 +05:30"
        );
        assert_eq!(
            f("Z ZZZ ZZZZ ZZZZZ", "2006-01-02T15:04:05-08:00"),
            "-08:00 -0800 -0800 -08:00"
        );
        assert_eq!(
            f("Z ZZZ ZZZZ ZZZZZ", "2006-01-02T15:04:05-00:00"),
            "Z UTC +0000 +00:00"
        );
        // Go accepts offsets up to 24:60.
        assert_eq!(f("Z", "2006-01-02T15:04:05+24:60"), "+25:00");
        // Fields are those of the timestamp's own offset.
        assert_eq!(
            f("YYYY-MM-DD hh", "0000-01-01T00:30:00+01:00"),
            "0000-01-01 00"
        );
        assert_eq!(f("H AA h aa", "2006-01-02T00:04:05Z"), "12 AM 0 am");
        assert_eq!(f("H AA", "2006-01-02T12:04:05Z"), "12 PM");
        assert_eq!(f("EEE", "2016-02-29T23:59:59.999999999Z"), "Mon");
        assert_eq!(f("ss", "2016-02-29T23:59:59,5Z"), "59");
        assert_eq!(f("YY", "0005-01-01T00:00:00Z"), "05");
        assert_eq!(f("h", "2017-01-02T1:02:03Z"), "1");
    }

    #[test]
    fn formatdate_format_errors() {
        let ts = "2006-01-02T15:04:05Z";
        let cases = [
            (
                "Y",
                "invalid date format verb \"Y\": year must either be \"YY\" or \"YYYY\"",
            ),
            (
                "YYYYY",
                "invalid date format verb \"YYYYY\": year must either be \"YY\" or \"YYYY\"",
            ),
            ("A", "invalid date format verb \"A\": must be \"AA\""),
            ("a", "invalid date format verb \"a\": must be \"aa\""),
            ("'blah blah", "unterminated literal '"),
            ("'", "unterminated literal '"),
            ("'''", "unterminated literal '"),
            (
                "MMMMM",
                "invalid date format verb \"MMMMM\": month must be \"M\", \"MM\", \"MMM\", or \"MMMM\"",
            ),
            (
                "DDD",
                "invalid date format verb \"DDD\": day of month must either be \"D\" or \"DD\"",
            ),
            (
                "EE",
                "invalid date format verb \"EE\": day of week must either be \"EEE\" or \"EEEE\"",
            ),
            (
                "hhh",
                "invalid date format verb \"hhh\": 24-hour must either be \"h\" or \"hh\"",
            ),
            (
                "HHH",
                "invalid date format verb \"HHH\": 12-hour must either be \"H\" or \"HH\"",
            ),
            (
                "mmm",
                "invalid date format verb \"mmm\": minute must either be \"m\" or \"mm\"",
            ),
            (
                "sss",
                "invalid date format verb \"sss\": second must either be \"s\" or \"ss\"",
            ),
            (
                "ZZ",
                "invalid date format verb \"ZZ\": timezone must be Z, ZZZZ, or ZZZZZ",
            ),
            ("q", "invalid date format verb \"q\""),
            ("YYYY-T", "invalid date format verb \"T\""),
        ];
        for (format, msg) in cases {
            assert_eq!(
                arg_err("formatdate", vec![s(format), s(ts)]),
                (0, msg.to_string()),
                "{format:?}"
            );
        }
    }

    #[test]
    fn formatdate_timestamp_errors() {
        let cases = [
            ("", "end of string before year"),
            ("2017-01-02", "missing required time introducer 'T'"),
            (
                "2017-12-02t00:00:00Z",
                "missing required time introducer 'T'",
            ),
            ("2017:01:02", "found \":01:02\" where \"-\" is expected"),
            ("2017", "end of string where \"-\" is expected"),
            ("2017-01-02T", "end of string before hour"),
            ("2017-01-02T00", "end of string where \":\" is expected"),
            ("2017-01-02T00:00:00", "end of string before UTC offset"),
            ("2017-01-02T26:00:00Z", "cannot use \":00:00Z\" as hour"),
            ("2017-01-02T24:00:00Z", "cannot use \":00:00Z\" as hour"),
            (
                "2017-13-02T00:00:00Z",
                "cannot use \"-02T00:00:00Z\" as month",
            ),
            (
                "2017-00-02T00:00:00Z",
                "cannot use \"-02T00:00:00Z\" as month",
            ),
            ("2017-02-31T00:00:00Z", "day out of range"),
            ("2100-02-29T00:00:00Z", "day out of range"),
            ("2017-02-00T00:00:00Z", "day out of range"),
            (
                "\"2017-12-02T00:00:00Z\"",
                "cannot use \"\\\"2017-12-02T00:00:00Z\\\"\" as year",
            ),
            // Go's parser reports the element it started from (cty's own
            // test predates this and expects "-02T00:00:00Z").
            (
                "2-12-02T00:00:00Z",
                "cannot use \"2-12-02T00:00:00Z\" as year",
            ),
            ("0", "cannot use \"0\" as year"),
            (
                "2017-1-02T00:00:00Z",
                "cannot use \"1-02T00:00:00Z\" as month",
            ),
            (
                "2017-01-2T00:00:00Z",
                "cannot use \"2T00:00:00Z\" as day of month",
            ),
            ("2017-01-02T00:0:00Z", "cannot use \"0:00Z\" as minute"),
            ("2017-01-02T00:60:00Z", "cannot use \":00Z\" as minute"),
            ("2017-01-02T00:00:60Z", "cannot use \"Z\" as second"),
            ("2017-01-02T00:00:0Z", "cannot use \"0Z\" as second"),
            ("2017-01-02T00:00:00z", "cannot use \"z\" as UTC offset"),
            (
                "2017-01-02T00:00:00+0100",
                "cannot use \"+0100\" as UTC offset",
            ),
            (
                "2017-01-02T00:00:00*01:00",
                "cannot use \"*01:00\" as UTC offset",
            ),
            (
                "2017-01-02T00:00:00+25:00",
                "end of string before UTC offset",
            ),
            (
                "2017-01-02T00:00:00+01:61x",
                "cannot use \"x\" as UTC offset",
            ),
            ("2017-01-02T00:00:00.Z", "cannot use \".Z\" as UTC offset"),
            (
                "2017-01-02T00:00:00Zextra",
                "cannot use \"extra\" as timestamp segment",
            ),
            (
                "2017-01-02T00:00:00Z\u{e9}",
                "cannot use \"\u{e9}\" as timestamp segment",
            ),
            (
                "2017-01-02T00:00:00+25:0\u{e9}",
                "cannot use \"\\xa9\" as UTC offset",
            ),
            (
                "2017-01-02T00:00:00Z\n",
                "cannot use \"\\n\" as timestamp segment",
            ),
        ];
        for (ts, msg) in cases {
            assert_eq!(
                arg_err("formatdate", vec![s("YYYY"), s(ts)]),
                (1, format!("not a valid RFC3339 timestamp: {msg}")),
                "{ts:?}"
            );
        }
    }

    #[test]
    fn formatdate_scanner_token_limit() {
        let ts = "2006-01-02T15:04:05Z";
        // bufio.Scanner cannot hold a 64 KiB token: go-cty stops formatting
        // there without an error.
        let long = format!("YYYY '{}'", "x".repeat(70_000));
        assert_eq!(ok_str("formatdate", vec![s(&long), s(ts)]), "2006 ");
        let fits = format!("'{}' YY", "x".repeat(1_000));
        assert_eq!(
            ok_str("formatdate", vec![s(&fits), s(ts)]),
            format!("{} 06", "x".repeat(1_000))
        );
        let literal = format!("{} YY", "-".repeat(70_000));
        assert_eq!(
            ok_str("formatdate", vec![s(&literal), s(ts)]),
            format!("{} 06", "-".repeat(70_000))
        );
    }

    // ---------------------------------------------------------- timeadd

    #[test]
    fn timeadd_vectors() {
        let cases = [
            ("2017-11-22T00:00:00Z", "1m", "2017-11-22T00:01:00Z"),
            ("2017-11-22T00:00:00Z", "10m1s", "2017-11-22T00:10:01Z"),
            ("2017-11-22T00:00:00Z", "-1h", "2017-11-21T23:00:00Z"),
            ("2017-11-22T00:00:00Z", "1.5h", "2017-11-22T01:30:00Z"),
            ("2017-11-22T00:00:00Z", "-2.5s", "2017-11-21T23:59:57Z"),
            ("2017-11-22T00:00:00Z", "+1h1h", "2017-11-22T02:00:00Z"),
            ("2017-11-22T00:00:00Z", "0", "2017-11-22T00:00:00Z"),
            ("2017-11-22T00:00:00Z", "-0", "2017-11-22T00:00:00Z"),
            ("2017-11-22T00:00:00Z", ".5s1.s", "2017-11-22T00:00:01Z"),
            ("2017-11-22T00:00:00Z", "1500ms", "2017-11-22T00:00:01Z"),
            ("2017-11-22T00:00:00Z", "1000000us", "2017-11-22T00:00:01Z"),
            (
                "2017-11-22T00:00:00Z",
                "1000000\u{b5}s",
                "2017-11-22T00:00:01Z",
            ),
            (
                "2017-11-22T00:00:00Z",
                "1000000\u{3bc}s",
                "2017-11-22T00:00:01Z",
            ),
            (
                "2017-11-22T00:00:00Z",
                "2000000000ns",
                "2017-11-22T00:00:02Z",
            ),
            (
                "2017-11-22T00:00:00+05:00",
                "1h",
                "2017-11-22T01:00:00+05:00",
            ),
            ("2017-11-22T00:00:00-00:00", "1h", "2017-11-22T01:00:00Z"),
            ("2017-12-31T23:59:59.5Z", "500ms", "2018-01-01T00:00:00Z"),
            ("2017-12-31T23:59:59.4Z", "500ms", "2017-12-31T23:59:59Z"),
            ("2017-01-01T00:00:00.25Z", "-500ms", "2016-12-31T23:59:59Z"),
            ("0000-01-01T00:00:00Z", "-1s", "-0001-12-31T23:59:59Z"),
            ("9999-12-31T23:59:59Z", "1s", "10000-01-01T00:00:00Z"),
            ("2017-11-22T00:00:00Z", "2562047h", "2310-03-03T23:00:00Z"),
            (
                "2017-11-22T00:00:00Z",
                "-9223372036854775808ns",
                "1725-08-13T00:12:43Z",
            ),
            (
                "2017-11-22T00:00:00Z",
                "1.0000000000000000000001h",
                "2017-11-22T01:00:00Z",
            ),
        ];
        for (ts, d, want) in cases {
            assert_eq!(
                ok_str("timeadd", vec![s(ts), s(d)]),
                want,
                "timeadd({ts}, {d})"
            );
        }
    }

    #[test]
    fn timeadd_errors() {
        let ts = "2017-11-22T00:00:00Z";
        let cases = [
            ("", "time: invalid duration \"\""),
            ("-", "time: invalid duration \"-\""),
            ("bad", "time: invalid duration \"bad\""),
            ("1", "time: missing unit in duration \"1\""),
            ("1h2", "time: missing unit in duration \"1h2\""),
            ("1x", "time: unknown unit \"x\" in duration \"1x\""),
            (
                "1\u{e9}",
                "time: unknown unit \"\\xc3\\xa9\" in duration \"1\\xc3\\xa9\"",
            ),
            (".s", "time: invalid duration \".s\""),
            ("1h-1m", "time: unknown unit \"h-\" in duration \"1h-1m\""),
            ("1h1", "time: missing unit in duration \"1h1\""),
            (
                "9223372036854775808ns",
                "time: invalid duration \"9223372036854775808ns\"",
            ),
            ("2562048h", "time: invalid duration \"2562048h\""),
            (
                "99999999999999999999s",
                "time: invalid duration \"99999999999999999999s\"",
            ),
            ("\"1s\"", "time: invalid duration \"\\\"1s\\\"\""),
        ];
        for (d, msg) in cases {
            assert_eq!(failed("timeadd", vec![s(ts), s(d)]), msg, "{d:?}");
        }
        assert_eq!(
            failed("timeadd", vec![s("2017-11-22"), s("1h")]),
            "not a valid RFC3339 timestamp: missing required time introducer 'T'"
        );
    }

    // ---------------------------------------------------------- timestamp

    #[test]
    fn timestamp_is_now_in_utc() {
        let before = chrono::Utc::now().timestamp();
        let now = ok_str("timestamp", vec![]);
        let after = chrono::Utc::now().timestamp();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.ends_with('Z'), "{now}");
        let parsed = super::parse_rfc3339(&now).expect("timestamp() parses back");
        assert!(before <= parsed.unix && parsed.unix <= after, "{now}");
        assert!(matches!(
            call("timestamp", vec![s("x")]),
            Err(FuncError::Arity { .. })
        ));
    }

    // ---------------------------------------------------------- formattimestamp

    #[test]
    fn formattimestamp_vectors() {
        // Conformance case 335.
        assert_eq!(
            ok_str("formattimestamp", vec![s("X"), s("2015-10-21T00:00:00Z")]),
            "1445385600"
        );
        assert_eq!(
            ok_str("formattimestamp", vec![s("X"), n(1_445_385_600.0)]),
            "1445385600"
        );
        assert_eq!(
            ok_str(
                "formattimestamp",
                vec![s("YYYY-MM-DD"), s("2025-09-16T12:00:00Z")]
            ),
            "2025-09-16"
        );
        assert_eq!(
            ok_str(
                "formattimestamp",
                vec![s("YYYY-MM-DD'T'hh:mm:ssZ"), n(1_690_328_596.0)]
            ),
            "2023-07-25T23:43:16Z"
        );
        assert_eq!(
            ok_str(
                "formattimestamp",
                vec![s("YYYY-MM-DD'T'hh:mm:ssZ"), n(-1.0)]
            ),
            "1969-12-31T23:59:59Z"
        );
        // More.
        assert_eq!(
            ok_str(
                "formattimestamp",
                vec![s("X"), s("2015-10-21T02:00:00.9+02:00")]
            ),
            "1445385600"
        );
        assert_eq!(
            ok_str("formattimestamp", vec![s("X"), s("1969-12-31T23:59:59.5Z")]),
            "-1"
        );
        assert_eq!(ok_str("formattimestamp", vec![s("X"), n(-5.0)]), "-5");
        assert_eq!(
            ok_str(
                "formattimestamp",
                vec![s("hh:mm ZZZ"), s("2015-10-21T02:00:00+02:00")]
            ),
            "02:00 +0200"
        );
        assert_eq!(
            ok_str("formattimestamp", vec![s("EEEE ZZZ"), n(0.0)]),
            "Thursday UTC"
        );
        assert_eq!(
            ok_str("formattimestamp", vec![s("YYYY"), n(253_402_300_800.0)]),
            "10000"
        );
    }

    #[test]
    fn formattimestamp_errors() {
        // Conformance cases 336-338.
        assert_eq!(
            arg_err("formattimestamp", vec![s("YYYY-MM-DD"), n(1.2)]),
            (1, "unix timestamp must be an integer".to_string())
        );
        assert_eq!(
            arg_err("formattimestamp", vec![s("YYYY-MM-DD"), s("0")]),
            (
                1,
                "not a valid RFC3339 timestamp: cannot use \"0\" as year".to_string()
            )
        );
        assert_eq!(
            arg_err("formattimestamp", vec![s("X"), s("0")]),
            (1, "timestamp string must be RFC3339".to_string())
        );
        assert_eq!(
            arg_err("formattimestamp", vec![s("X"), n(1e19)]),
            (1, "unix timestamp must be an integer".to_string())
        );
        assert_eq!(
            arg_err("formattimestamp", vec![s("Y"), n(0.0)]),
            (
                0,
                "invalid date format verb \"Y\": year must either be \"YY\" or \"YYYY\""
                    .to_string()
            )
        );
        assert_eq!(
            arg_err("formattimestamp", vec![s("X"), Value::Bool(true)]).0,
            1
        );
        assert_eq!(arg_err("formattimestamp", vec![s("X"), Value::null()]).0, 1);
    }

    // ---------------------------------------------------------- unixtimestampparse

    fn parsed(ts: f64) -> Vec<(String, String)> {
        match ok("unixtimestampparse", vec![n(ts)]) {
            Value::Object(m) => m
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::Number(x) => crate::value::format_number(x),
                        Value::String(x) => x,
                        other => panic!("{other:?}"),
                    };
                    (k, v)
                })
                .collect(),
            other => panic!("not an object: {other:?}"),
        }
    }

    fn expect(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn unixtimestampparse_vectors() {
        // Conformance case 333.
        assert_eq!(
            parsed(1_690_328_596.0),
            expect(&[
                ("year", "2023"),
                ("year_day", "206"),
                ("day", "25"),
                ("month", "7"),
                ("month_name", "July"),
                ("weekday", "2"),
                ("weekday_name", "Tuesday"),
                ("hour", "23"),
                ("minute", "43"),
                ("second", "16"),
                ("rfc3339", "2023-07-25T23:43:16Z"),
                ("iso_year", "2023"),
                ("iso_week", "30"),
            ])
        );
        assert_eq!(
            parsed(0.0),
            expect(&[
                ("year", "1970"),
                ("year_day", "1"),
                ("day", "1"),
                ("month", "1"),
                ("month_name", "January"),
                ("weekday", "4"),
                ("weekday_name", "Thursday"),
                ("hour", "0"),
                ("minute", "0"),
                ("second", "0"),
                ("rfc3339", "1970-01-01T00:00:00Z"),
                ("iso_year", "1970"),
                ("iso_week", "1"),
            ])
        );
        assert_eq!(
            parsed(-1.0),
            expect(&[
                ("year", "1969"),
                ("year_day", "365"),
                ("day", "31"),
                ("month", "12"),
                ("month_name", "December"),
                ("weekday", "3"),
                ("weekday_name", "Wednesday"),
                ("hour", "23"),
                ("minute", "59"),
                ("second", "59"),
                ("rfc3339", "1969-12-31T23:59:59Z"),
                ("iso_year", "1970"),
                ("iso_week", "1"),
            ])
        );
    }

    #[test]
    fn unixtimestampparse_iso_weeks_and_extremes() {
        let field = |ts: f64, k: &str| {
            parsed(ts)
                .into_iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v)
                .unwrap_or_default()
        };
        // 2021-01-03 (Sunday) belongs to ISO week 53 of 2020.
        assert_eq!(field(1_609_632_000.0, "iso_year"), "2020");
        assert_eq!(field(1_609_632_000.0, "iso_week"), "53");
        // 2024-12-30 (Monday) is in ISO week 1 of 2025.
        assert_eq!(field(1_735_516_800.0, "iso_year"), "2025");
        assert_eq!(field(1_735_516_800.0, "iso_week"), "1");
        // 2024-12-31 is day 366 of a leap year.
        assert_eq!(field(1_735_603_200.0, "year_day"), "366");
        assert_eq!(field(-62_135_596_801.0, "rfc3339"), "0000-12-31T23:59:59Z");
        assert_eq!(field(-62_167_219_201.0, "rfc3339"), "-0001-12-31T23:59:59Z");
        assert_eq!(field(-62_167_219_201.0, "year"), "-1");
        assert_eq!(field(253_402_300_800.0, "rfc3339"), "10000-01-01T00:00:00Z");
        // Anything an int64 holds works without overflow.
        for ts in [
            9.2e18,
            -9.2e18,
            9_223_372_036_854_774_784.0,
            -9_223_372_036_854_775_808.0,
        ] {
            assert!(!field(ts, "rfc3339").is_empty());
        }
        // "0" converts to a number under HCL's rules.
        assert!(ok("unixtimestampparse", vec![s("0")]).len() == Some(13));
    }

    #[test]
    fn unixtimestampparse_errors() {
        // Conformance case 334.
        for bad in [1.2, -0.5, 9_223_372_036_854_775_808.0, 1e300] {
            assert_eq!(
                arg_err("unixtimestampparse", vec![n(bad)]),
                (0, "unix timestamp must be an integer".to_string())
            );
        }
        assert!(matches!(
            call("unixtimestampparse", vec![s("x")]),
            Err(FuncError::Arg { index: 0, .. })
        ));
    }

    // ---------------------------------------------------------- robustness

    #[test]
    fn odd_inputs_never_panic() {
        let strings = [
            "",
            "'",
            "''",
            "/",
            "\u{e9}",
            "\u{1f600}",
            "-----BEGIN X-----\n-----END X-----",
            "-----BEGIN RSA PRIVATE KEY-----\n\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY-----\nA: b\n",
            "::/0",
            "::/128",
            "0.0.0.0/0",
            "255.255.255.255/32",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128",
            "::ffff:0.0.0.0/96",
            "::ffff:255.255.255.255/128",
            "2017-01-02T00:00:00+99:99",
            "9999-12-31T23:59:59-24:60",
            "0000-01-01T00:00:00+24:60",
            "2017-01-02T00:00:00.1234567890123456789Z",
            "9223372036854775807h",
            "-9223372036854775808ns",
            "1.9999999999999999999999999h",
            "00000000000000000000000000000000000000001ns",
            "YYYYYYYYYYYYYYYY",
            "ZZZZZZ\u{e9}'\u{e9}'",
        ];
        let numbers = [
            0.0,
            -1.0,
            1.5,
            1e300,
            -1e300,
            9.2e18,
            -9.2e18,
            9_223_372_036_854_775_807.0,
            -9_223_372_036_854_775_808.0,
            4_294_967_295.0,
            -4_294_967_296.0,
            64.0,
            -64.0,
            128.0,
            -129.0,
        ];
        for a in strings {
            for f in [
                "base64decode",
                "base64encode",
                "md5",
                "sha1",
                "sha256",
                "sha512",
                "urlencode",
                "cidrnetmask",
                "unixtimestampparse",
            ] {
                let _ = call(f, vec![s(a)]);
            }
            for b in strings {
                for f in [
                    "formatdate",
                    "formattimestamp",
                    "timeadd",
                    "rsadecrypt",
                    "uuidv5",
                ] {
                    let _ = call(f, vec![s(a), s(b)]);
                }
            }
            for x in numbers {
                let _ = call("cidrhost", vec![s(a), n(x)]);
                let _ = call("formattimestamp", vec![s(a), n(x)]);
                let _ = call("unixtimestampparse", vec![n(x)]);
                for y in numbers {
                    let _ = call("cidrsubnet", vec![s(a), n(x), n(y)]);
                    let _ = call("cidrsubnets", vec![s(a), n(x), n(y)]);
                }
            }
        }
        for prefix in [
            "10.0.0.0/8",
            "fd00::/8",
            "::ffff:10.0.0.0/104",
            "0.0.0.0/0",
            "::/0",
        ] {
            for x in numbers {
                let _ = call("cidrhost", vec![s(prefix), n(x)]);
                for y in numbers {
                    let _ = call("cidrsubnet", vec![s(prefix), n(x), n(y)]);
                    let _ = call("cidrsubnets", vec![s(prefix), n(x), n(y)]);
                }
            }
        }
    }
}

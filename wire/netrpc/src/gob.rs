//! Go's `encoding/gob`, as much of it as net/rpc services with plain data
//! types use: the stream framing, type definitions (`wireType`) and values
//! of structs, slices, arrays, maps, the basic types and
//! `GobEncoder`-style opaque bytes. Interface values are refused.
//!
//! Wire format, as Go writes it: a stream of messages, each a byte count
//! followed by a signed type id. A negative id `-n` defines type `n` (a
//! `wireType` follows); a positive id is a value of that type. Unsigned
//! integers below 128 are one byte; larger ones are the negated byte count
//! followed by the big-endian bytes. Signed integers are shifted left one
//! bit, complemented when negative, with the sign in bit 0. Struct fields
//! are sent as (field-number delta, value) and end with a 0 delta; fields
//! holding the zero value are left out. Type ids are per stream direction:
//! a decoder learns them from the definitions that precede the values.
//!
//! Decoding is into a generic [`Value`] tree that callers map by field
//! name, which is how Go matches fields too: fields one side lacks are
//! ignored, missing ones are zero. Encoding is from static schemas
//! ([`TypeDef`]) carrying the ids and names Go's own processes use, so our
//! bytes equal Go's for the same types.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read};

/// Largest message we accept: 1 MiB. Go allows 1 GiB; a real call is a
/// few KiB (the dhcp plugin's largest, an ADD whose argument carries the
/// network config, is its config's size plus about 600 bytes), so this
/// only bounds what a hostile peer can make us read and hold.
pub const MAX_MESSAGE: u64 = 1 << 20;
/// Most memory one value may take once decoded: 2 MiB, counted as it is
/// built (each element's `Value`, each field's name, each string's and
/// byte slice's bytes), and charged before a slice or map is allocated.
/// A slice of one-byte elements costs 32 bytes an element decoded, so
/// its length is bounded by this, not only by the bytes that carry it.
pub const MAX_DECODED: usize = 2 << 20;
/// Nesting bound for values below the top-level one (types may be
/// recursive). Decoding keeps its work on the heap, not the call stack,
/// so the bound is for what the value's users (drop, comparisons) recurse
/// through.
pub const MAX_DEPTH: usize = 64;
/// Type definitions one stream may carry: at most 64, of at most 64 KiB
/// in all (Go's net/rpc sends one or two per direction, a CNI result 11).
pub const MAX_TYPES: usize = 64;
pub const MAX_TYPE_BYTES: usize = 64 << 10;

// Type ids every gob stream knows without definitions (Go's type.go).
pub const BOOL: i64 = 1;
pub const INT: i64 = 2;
pub const UINT: i64 = 3;
pub const FLOAT: i64 = 4;
pub const BYTES: i64 = 5;
pub const STRING: i64 = 6;
pub const COMPLEX: i64 = 7;
pub const INTERFACE: i64 = 8;
/// The first id a stream may define.
pub const FIRST_USER_ID: i64 = 65;

/// A gob stream that could not be read or written.
#[derive(Debug)]
pub enum Error {
    /// The transport failed (including end of stream).
    Io(io::Error),
    /// The bytes are not a gob stream we can decode.
    Malformed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Malformed(m) => write!(f, "gob: {m}"),
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

fn malformed<T>(msg: impl Into<String>) -> Result<T, Error> {
    Err(Error::Malformed(msg.into()))
}

/// A decoded value. Structs keep only the fields that were sent, by name.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Complex(f64, f64),
    Bytes(Vec<u8>),
    String(String),
    Struct(Vec<(String, Value)>),
    Slice(Vec<Value>),
    Map(Vec<(Value, Value)>),
    /// The bytes of a type with its own encoding (GobEncoder,
    /// BinaryMarshaler, TextMarshaler).
    Opaque(Vec<u8>),
}

impl Value {
    /// The kind of value, in Go's words, for error texts.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Uint(_) => "uint",
            Value::Float(_) => "float",
            Value::Complex(..) => "complex",
            Value::Bytes(_) => "[]byte",
            Value::String(_) => "string",
            Value::Struct(_) => "struct",
            Value::Slice(_) => "slice",
            Value::Map(_) => "map",
            Value::Opaque(_) => "opaque bytes",
        }
    }

    /// A struct's field, if it was sent.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A struct value's fields by name, with Go's zero for a field that was not
/// sent, and an error naming the field for one of another type.
pub mod field {
    use super::Value;

    /// The error text for field `name` holding `got` where `want` belongs
    /// (its kind, not its contents: those are the peer's, and may be large).
    pub fn wrong(name: &str, want: &str, got: &Value) -> String {
        format!("field {name}: want {want}, got {}", got.kind())
    }

    /// A string field.
    pub fn string(v: &Value, name: &str) -> Result<String, String> {
        match v.field(name) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(wrong(name, "string", other)),
        }
    }

    /// A `[]byte` field.
    pub fn bytes(v: &Value, name: &str) -> Result<Vec<u8>, String> {
        match v.field(name) {
            None => Ok(Vec::new()),
            Some(Value::Bytes(b)) => Ok(b.clone()),
            Some(other) => Err(wrong(name, "[]byte", other)),
        }
    }

    /// An unsigned field.
    pub fn uint(v: &Value, name: &str) -> Result<u64, String> {
        match v.field(name) {
            None => Ok(0),
            Some(Value::Uint(u)) => Ok(*u),
            Some(other) => Err(wrong(name, "uint", other)),
        }
    }

    /// An int field; `None` when absent (Go's nil pointer, and its zero).
    pub fn int(v: &Value, name: &str) -> Result<Option<i64>, String> {
        match v.field(name) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i)),
            Some(other) => Err(wrong(name, "int", other)),
        }
    }
}

// ---- primitive reading ----

/// Reads primitives from one message's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn byte(&mut self) -> Result<u8, Error> {
        match self.bytes.get(self.pos) {
            Some(b) => {
                self.pos += 1;
                Ok(*b)
            }
            None => malformed("unexpected end of message"),
        }
    }

    fn uint(&mut self) -> Result<u64, Error> {
        let first = self.byte()?;
        if first < 0x80 {
            return Ok(u64::from(first));
        }
        let n = first.wrapping_neg() as usize;
        if n > 8 {
            return malformed("encoded unsigned integer out of range");
        }
        let mut v = 0u64;
        for _ in 0..n {
            v = (v << 8) | u64::from(self.byte()?);
        }
        Ok(v)
    }

    fn int(&mut self) -> Result<i64, Error> {
        Ok(unzigzag(self.uint()?))
    }

    /// A count of things that each take at least `each` bytes (1 for a
    /// byte or a slice element, 2 for a map entry): never more than what
    /// is left can hold, so no element is free and a hostile count cannot
    /// make us allocate beyond the message.
    fn count(&mut self, each: u64) -> Result<usize, Error> {
        let n = self.uint()?;
        if n.saturating_mul(each) > self.remaining() as u64 {
            return malformed(format!(
                "count {n} exceeds the {} bytes left",
                self.remaining()
            ));
        }
        Ok(n as usize)
    }

    fn bytes(&mut self) -> Result<&'a [u8], Error> {
        let n = self.count(1)?;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn string(&mut self) -> Result<String, Error> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }

    fn float(&mut self) -> Result<f64, Error> {
        Ok(f64::from_bits(self.uint()?.swap_bytes()))
    }
}

fn unzigzag(u: u64) -> i64 {
    if u & 1 == 1 {
        !((u >> 1) as i64)
    } else {
        (u >> 1) as i64
    }
}

fn zigzag(i: i64) -> u64 {
    if i < 0 {
        ((!i as u64) << 1) | 1
    } else {
        (i as u64) << 1
    }
}

/// Appends an unsigned integer in gob's encoding.
pub fn put_uint(out: &mut Vec<u8>, v: u64) {
    if v < 0x80 {
        out.push(v as u8);
        return;
    }
    let be = v.to_be_bytes();
    let skip = be.iter().take_while(|b| **b == 0).count();
    out.push((8 - skip as u8).wrapping_neg());
    out.extend_from_slice(&be[skip..]);
}

/// Appends a signed integer in gob's encoding.
pub fn put_int(out: &mut Vec<u8>, v: i64) {
    put_uint(out, zigzag(v));
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uint(out, b.len() as u64);
    out.extend_from_slice(b);
}

// ---- type definitions as received ----

#[derive(Debug, Clone, PartialEq)]
enum WireType {
    Struct {
        fields: Vec<(String, i64)>,
    },
    Slice {
        elem: i64,
    },
    Array {
        elem: i64,
        len: u64,
    },
    Map {
        key: i64,
        elem: i64,
    },
    /// GobEncoder, BinaryMarshaler or TextMarshaler: opaque bytes.
    Opaque,
}

/// Reads a struct's fields: calls `field` with each field number in
/// turn until the terminating 0 delta.
fn read_fields<'a>(
    c: &mut Cursor<'a>,
    count: usize,
    mut field: impl FnMut(&mut Cursor<'a>, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut num: i64 = -1;
    loop {
        let delta = c.uint()?;
        if delta == 0 {
            return Ok(());
        }
        num = match i64::try_from(delta).ok().and_then(|d| num.checked_add(d)) {
            Some(n) if (n as u64) < count as u64 => n,
            _ => return malformed(format!("field number out of range (delta {delta})")),
        };
        field(c, num as usize)?;
    }
}

/// `CommonType{Name string; Id typeId}`: returns the id.
fn read_common(c: &mut Cursor<'_>) -> Result<i64, Error> {
    let mut id = 0;
    read_fields(c, 2, |c, n| {
        match n {
            0 => {
                c.bytes()?;
            }
            _ => id = c.int()?,
        }
        Ok(())
    })?;
    Ok(id)
}

/// A `wireType` message body: returns the id it defines (from its
/// CommonType) and the definition.
fn read_wire_type(c: &mut Cursor<'_>) -> Result<(i64, WireType), Error> {
    let mut out: Option<(i64, WireType)> = None;
    read_fields(c, 7, |c, n| {
        if out.is_some() {
            return malformed("wireType with more than one kind");
        }
        let mut id = 0;
        let wt = match n {
            // arrayType{CommonType; Elem typeId; Len int}
            0 => {
                let (mut elem, mut len) = (0, 0);
                read_fields(c, 3, |c, f| {
                    match f {
                        0 => id = read_common(c)?,
                        1 => elem = c.int()?,
                        _ => len = c.int()?,
                    }
                    Ok(())
                })?;
                let Ok(len) = u64::try_from(len) else {
                    return malformed("negative array length");
                };
                WireType::Array { elem, len }
            }
            // sliceType{CommonType; Elem typeId}
            1 => {
                let mut elem = 0;
                read_fields(c, 2, |c, f| {
                    match f {
                        0 => id = read_common(c)?,
                        _ => elem = c.int()?,
                    }
                    Ok(())
                })?;
                WireType::Slice { elem }
            }
            // structType{CommonType; Field []fieldType{Name string; Id typeId}}
            2 => {
                let mut fields = Vec::new();
                read_fields(c, 2, |c, f| {
                    if f == 0 {
                        id = read_common(c)?;
                        return Ok(());
                    }
                    for _ in 0..c.count(1)? {
                        let (mut name, mut fid) = (String::new(), 0);
                        read_fields(c, 2, |c, g| {
                            match g {
                                0 => name = c.string()?,
                                _ => fid = c.int()?,
                            }
                            Ok(())
                        })?;
                        fields.push((name, fid));
                    }
                    Ok(())
                })?;
                WireType::Struct { fields }
            }
            // mapType{CommonType; Key typeId; Elem typeId}
            3 => {
                let (mut key, mut elem) = (0, 0);
                read_fields(c, 3, |c, f| {
                    match f {
                        0 => id = read_common(c)?,
                        1 => key = c.int()?,
                        _ => elem = c.int()?,
                    }
                    Ok(())
                })?;
                WireType::Map { key, elem }
            }
            // gobEncoderType{CommonType}, for the three external encodings
            _ => {
                read_fields(c, 1, |c, _| {
                    id = read_common(c)?;
                    Ok(())
                })?;
                WireType::Opaque
            }
        };
        out = Some((id, wt));
        Ok(())
    })?;
    match out {
        Some(d) => Ok(d),
        None => malformed("empty wireType"),
    }
}

// ---- decoding ----

/// One direction of a gob stream, reading: the types defined so far.
#[derive(Debug, Default)]
pub struct Decoder {
    types: HashMap<i64, WireType>,
    /// Bytes of the definition messages received (at most MAX_TYPE_BYTES).
    type_bytes: usize,
}

/// What is left of a value's MAX_DECODED bytes.
struct Budget(usize);

impl Budget {
    fn charge(&mut self, n: usize) -> Result<(), Error> {
        match self.0.checked_sub(n) {
            Some(left) => {
                self.0 = left;
                Ok(())
            }
            None => malformed(format!("value larger than {MAX_DECODED} bytes decoded")),
        }
    }

    /// `n` items of `T`, before a `Vec` of them is allocated.
    fn charge_items<T>(&mut self, n: usize) -> Result<(), Error> {
        self.charge(n.saturating_mul(std::mem::size_of::<T>()))
    }
}

/// A composite value being decoded: its parts so far and what comes next.
enum Frame<'t> {
    Struct {
        fields: &'t [(String, i64)],
        /// The field being read (-1 before the first).
        num: i64,
        out: Vec<(String, Value)>,
    },
    /// A slice or an array: `left` elements still to come.
    Seq {
        elem: i64,
        left: usize,
        items: Vec<Value>,
    },
    Map {
        key: i64,
        elem: i64,
        left: usize,
        items: Vec<(Value, Value)>,
        /// The key whose element comes next.
        key_done: Option<Value>,
    },
}

impl Frame<'_> {
    /// The type of the next part, reading a struct's field number; `None`
    /// when the value is complete.
    fn want(&mut self, c: &mut Cursor<'_>) -> Result<Option<i64>, Error> {
        Ok(match self {
            Frame::Struct { fields, num, .. } => {
                let delta = c.uint()?;
                if delta == 0 {
                    return Ok(None);
                }
                let next = i64::try_from(delta).ok().and_then(|d| num.checked_add(d));
                let Some((n, (_, id))) =
                    next.and_then(|n| Some((n, fields.get(usize::try_from(n).ok()?)?)))
                else {
                    return malformed(format!("field number out of range (delta {delta})"));
                };
                *num = n;
                Some(*id)
            }
            Frame::Seq { elem, left, .. } => {
                if *left == 0 {
                    return Ok(None);
                }
                *left -= 1;
                Some(*elem)
            }
            Frame::Map {
                key,
                elem,
                left,
                key_done,
                ..
            } => {
                if key_done.is_some() {
                    Some(*elem)
                } else if *left == 0 {
                    None
                } else {
                    *left -= 1;
                    Some(*key)
                }
            }
        })
    }

    /// Takes the part `want` asked for.
    fn accept(&mut self, v: Value, budget: &mut Budget) -> Result<(), Error> {
        match self {
            Frame::Struct { fields, num, out } => {
                let name = usize::try_from(*num)
                    .ok()
                    .and_then(|n| fields.get(n))
                    .map_or("", |(name, _)| name.as_str());
                budget.charge(std::mem::size_of::<(String, Value)>() + name.len())?;
                out.push((name.to_string(), v));
            }
            // Charged when allocated.
            Frame::Seq { items, .. } => items.push(v),
            Frame::Map {
                items, key_done, ..
            } => match key_done.take() {
                None => *key_done = Some(v),
                Some(k) => items.push((k, v)),
            },
        }
        Ok(())
    }

    fn finish(self) -> Value {
        match self {
            Frame::Struct { out, .. } => Value::Struct(out),
            Frame::Seq { items, .. } => Value::Slice(items),
            Frame::Map { items, .. } => Value::Map(items),
        }
    }
}

/// A value's start: a basic value is complete at once.
enum Start<'t> {
    Done(Value),
    Frame(Frame<'t>),
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads messages until a value arrives, recording the type
    /// definitions that precede it. End of stream before the first byte
    /// of a message is `Io(UnexpectedEof)`.
    pub fn read_value(&mut self, r: &mut impl Read) -> Result<Value, Error> {
        loop {
            let msg = read_message(r)?;
            let mut c = Cursor {
                bytes: &msg,
                pos: 0,
            };
            let id = c.int()?;
            if id < 0 {
                self.type_bytes += msg.len();
                if self.types.len() >= MAX_TYPES || self.type_bytes > MAX_TYPE_BYTES {
                    return malformed(format!(
                        "more than {MAX_TYPES} type definitions or {MAX_TYPE_BYTES} bytes of them on one stream"
                    ));
                }
                self.define(id, &mut c)?;
            } else {
                let v = self.top_level(id, &mut c)?;
                if c.remaining() != 0 {
                    return malformed(format!("{} bytes left after a value", c.remaining()));
                }
                return Ok(v);
            }
            if c.remaining() != 0 {
                return malformed("extra data after a type definition");
            }
        }
    }

    fn define(&mut self, neg_id: i64, c: &mut Cursor<'_>) -> Result<(), Error> {
        let id = neg_id.checked_neg().unwrap_or(0);
        if id < FIRST_USER_ID {
            return malformed(format!("type id {id} cannot be defined"));
        }
        if self.types.contains_key(&id) {
            return malformed(format!("duplicate type id {id}"));
        }
        let (_, wt) = read_wire_type(c)?;
        self.types.insert(id, wt);
        Ok(())
    }

    fn top_level(&self, id: i64, c: &mut Cursor<'_>) -> Result<Value, Error> {
        // Anything but a struct is sent as a struct with one field: a 0
        // delta first.
        if !matches!(self.types.get(&id), Some(WireType::Struct { .. })) && c.uint()? != 0 {
            return malformed("a non-struct value must start with a 0 delta");
        }
        let mut budget = Budget(MAX_DECODED);
        self.decode(id, c, &mut budget)
    }

    /// Decodes a value of type `id` without recursion: the composite values
    /// being read are frames on a stack of at most MAX_DEPTH + 1 (the
    /// top-level value and those nested in it), on the heap.
    fn decode(&self, id: i64, c: &mut Cursor<'_>, budget: &mut Budget) -> Result<Value, Error> {
        let mut stack: Vec<Frame<'_>> = Vec::new();
        let mut next = id;
        loop {
            let mut done = match self.start(next, c, budget)? {
                Start::Done(v) => Some(v),
                Start::Frame(f) => {
                    if stack.len() > MAX_DEPTH {
                        return malformed("values nested too deep");
                    }
                    stack.push(f);
                    None
                }
            };
            // Hand each complete value to its parent until one wants a part.
            loop {
                let Some(top) = stack.last_mut() else {
                    return match done {
                        Some(v) => Ok(v),
                        None => malformed("no value"),
                    };
                };
                if let Some(v) = done.take() {
                    top.accept(v, budget)?;
                }
                match top.want(c)? {
                    Some(id) => {
                        next = id;
                        break;
                    }
                    None => done = stack.pop().map(Frame::finish),
                }
            }
        }
    }

    /// Reads a basic value whole, or the start of a composite one.
    fn start(&self, id: i64, c: &mut Cursor<'_>, budget: &mut Budget) -> Result<Start<'_>, Error> {
        let mut bytes = |c: &mut Cursor<'_>| -> Result<Vec<u8>, Error> {
            let b = c.bytes()?;
            budget.charge(b.len())?;
            Ok(b.to_vec())
        };
        Ok(Start::Done(match id {
            BOOL => Value::Bool(c.uint()? != 0),
            INT => Value::Int(c.int()?),
            UINT => Value::Uint(c.uint()?),
            FLOAT => Value::Float(c.float()?),
            COMPLEX => Value::Complex(c.float()?, c.float()?),
            BYTES => Value::Bytes(bytes(c)?),
            STRING => {
                let b = c.bytes()?;
                budget.charge(b.len())?;
                let s = String::from_utf8_lossy(b).into_owned();
                // Invalid UTF-8 grows: each bad byte is 3 of U+FFFD.
                budget.charge(s.len().saturating_sub(b.len()))?;
                Value::String(s)
            }
            INTERFACE => return malformed("interface values are not supported"),
            _ => match self.types.get(&id) {
                None => return malformed(format!("unknown type id {id}")),
                Some(WireType::Struct { fields }) => {
                    return Ok(Start::Frame(Frame::Struct {
                        fields,
                        num: -1,
                        out: Vec::new(),
                    }));
                }
                Some(WireType::Slice { elem }) => {
                    let n = c.count(1)?;
                    budget.charge_items::<Value>(n)?;
                    return Ok(Start::Frame(Frame::Seq {
                        elem: *elem,
                        left: n,
                        items: Vec::with_capacity(n),
                    }));
                }
                Some(WireType::Array { elem, len }) => {
                    let n = c.count(1)?;
                    if n as u64 != *len {
                        return malformed(format!("array of {len} sent with {n} elements"));
                    }
                    budget.charge_items::<Value>(n)?;
                    return Ok(Start::Frame(Frame::Seq {
                        elem: *elem,
                        left: n,
                        items: Vec::with_capacity(n),
                    }));
                }
                Some(WireType::Map { key, elem }) => {
                    let n = c.count(2)?;
                    budget.charge_items::<(Value, Value)>(n)?;
                    return Ok(Start::Frame(Frame::Map {
                        key: *key,
                        elem: *elem,
                        left: n,
                        items: Vec::with_capacity(n),
                        key_done: None,
                    }));
                }
                Some(WireType::Opaque) => Value::Opaque(bytes(c)?),
            },
        }))
    }
}

/// Reads one length-prefixed message.
fn read_message(r: &mut impl Read) -> Result<Vec<u8>, Error> {
    let mut first = [0u8; 1];
    r.read_exact(&mut first)?;
    let len = if first[0] < 0x80 {
        u64::from(first[0])
    } else {
        let n = first[0].wrapping_neg() as usize;
        if n > 8 {
            return malformed("message length out of range");
        }
        let mut be = [0u8; 8];
        r.read_exact(&mut be[8 - n..])?;
        u64::from_be_bytes(be)
    };
    if len == 0 || len > MAX_MESSAGE {
        return malformed(format!("invalid message length {len}"));
    }
    // Grows with what arrives rather than trusting the length up front.
    let mut msg = Vec::new();
    r.take(len).read_to_end(&mut msg)?;
    if msg.len() as u64 != len {
        return Err(Error::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(msg)
}

// ---- encoding ----

/// A field's or element's type in a schema.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    Int,
    Uint,
    Bytes,
    String,
    Def(&'static TypeDef),
}

impl Ty {
    fn id(self) -> i64 {
        match self {
            Ty::Int => INT,
            Ty::Uint => UINT,
            Ty::Bytes => BYTES,
            Ty::String => STRING,
            Ty::Def(d) => d.id,
        }
    }
}

/// A type we send, with the id and name a Go process gives it.
#[derive(Debug)]
pub struct TypeDef {
    pub id: i64,
    pub name: &'static str,
    pub kind: Kind,
}

#[derive(Debug)]
pub enum Kind {
    Struct(&'static [(&'static str, Ty)]),
    Slice(Ty),
}

/// One direction of a gob stream, writing: which definitions were sent.
#[derive(Debug, Default)]
pub struct Encoder {
    sent: Vec<&'static TypeDef>,
}

impl Encoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends to `out` the definitions of `def` and the types it uses
    /// that this stream has not sent yet (in Go's order), then `value`
    /// (a struct) as one message.
    pub fn encode(
        &mut self,
        out: &mut Vec<u8>,
        def: &'static TypeDef,
        value: &Value,
    ) -> Result<(), Error> {
        if !matches!(def.kind, Kind::Struct(_)) {
            // Go sends other values after a 0 field delta; ours are structs.
            return malformed(format!("{:?}: only structs are sent", def.name));
        }
        self.send_type(out, def)?;
        let mut body = Vec::new();
        put_int(&mut body, def.id);
        encode_value(&mut body, Ty::Def(def), value)?;
        // What our decoder would refuse, a peer like it would too.
        if body.len() as u64 > MAX_MESSAGE {
            return malformed(format!(
                "a message of {} bytes (at most {MAX_MESSAGE})",
                body.len()
            ));
        }
        put_message(out, &body);
        Ok(())
    }

    fn send_type(&mut self, out: &mut Vec<u8>, def: &'static TypeDef) -> Result<(), Error> {
        // Ids are per stream: two schemas with one id cannot share one.
        if let Some(other) = self.sent.iter().find(|d| d.id == def.id) {
            if std::ptr::eq(*other, def) {
                return Ok(());
            }
            return malformed(format!(
                "type id {} is {:?} on this stream, not {:?}",
                def.id, other.name, def.name
            ));
        }
        self.sent.push(def);
        let mut body = Vec::new();
        put_int(&mut body, -def.id);
        wire_type(&mut body, def);
        put_message(out, &body);
        match def.kind {
            Kind::Struct(fields) => {
                for (_, ty) in fields {
                    if let Ty::Def(d) = ty {
                        self.send_type(out, d)?;
                    }
                }
                Ok(())
            }
            Kind::Slice(Ty::Def(d)) => self.send_type(out, d),
            Kind::Slice(_) => Ok(()),
        }
    }
}

fn put_message(out: &mut Vec<u8>, body: &[u8]) {
    put_uint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// `CommonType{Name, Id}`: the name is left out when empty, as Go does.
fn put_common(out: &mut Vec<u8>, def: &TypeDef) {
    if def.name.is_empty() {
        out.push(2);
    } else {
        out.push(1);
        put_bytes(out, def.name.as_bytes());
        out.push(1);
    }
    put_int(out, def.id);
    out.push(0);
}

fn wire_type(out: &mut Vec<u8>, def: &TypeDef) {
    match def.kind {
        Kind::Struct(fields) => {
            out.push(3); // wireType.StructT
            out.push(1); // structType.CommonType
            put_common(out, def);
            if !fields.is_empty() {
                out.push(1); // structType.Field
                put_uint(out, fields.len() as u64);
                for (name, ty) in fields {
                    out.push(1);
                    put_bytes(out, name.as_bytes());
                    out.push(1);
                    put_int(out, ty.id());
                    out.push(0);
                }
            }
            out.push(0);
        }
        Kind::Slice(elem) => {
            out.push(2); // wireType.SliceT
            out.push(1); // sliceType.CommonType
            put_common(out, def);
            out.push(1); // sliceType.Elem
            put_int(out, elem.id());
            out.push(0);
        }
    }
    out.push(0);
}

/// Go leaves zero-valued fields out of a struct, except struct-typed ones.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Bytes(b) | Value::Opaque(b) => b.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Slice(s) => s.is_empty(),
        _ => false,
    }
}

fn mismatch<T>(ty: Ty, v: &Value) -> Result<T, Error> {
    malformed(format!("cannot encode {v:?} as {ty:?}"))
}

/// Encodes `v` as `ty`. Only struct fields are left out when zero; slice
/// elements are always sent.
fn encode_value(out: &mut Vec<u8>, ty: Ty, v: &Value) -> Result<(), Error> {
    match (ty, v) {
        (Ty::Int, Value::Int(i)) => put_int(out, *i),
        (Ty::Uint, Value::Uint(u)) => put_uint(out, *u),
        (Ty::Bytes, Value::Bytes(b)) => put_bytes(out, b),
        (Ty::String, Value::String(s)) => put_bytes(out, s.as_bytes()),
        (Ty::Def(def), _) => match (&def.kind, v) {
            (Kind::Struct(fields), Value::Struct(_)) => {
                let mut last: i64 = -1;
                for (n, (name, fty)) in fields.iter().enumerate() {
                    let is_struct = matches!(
                        fty,
                        Ty::Def(TypeDef {
                            kind: Kind::Struct(_),
                            ..
                        })
                    );
                    let fv = match v.field(name) {
                        Some(fv) if is_struct || !is_zero(fv) => fv,
                        // An absent struct field is sent empty, as Go
                        // sends a zero struct.
                        None if is_struct => &Value::Struct(Vec::new()),
                        _ => continue,
                    };
                    put_uint(out, (n as i64 - last) as u64);
                    last = n as i64;
                    encode_value(out, *fty, fv)?;
                }
                out.push(0);
            }
            (Kind::Slice(elem), Value::Slice(items)) => {
                put_uint(out, items.len() as u64);
                for item in items {
                    encode_value(out, *elem, item)?;
                }
            }
            _ => return mismatch(ty, v),
        },
        _ => return mismatch(ty, v),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_in_go_encoding() {
        // Go's documented examples: 7 → 07, 256 → FE 01 00; -129 → FE 01 01.
        let mut out = Vec::new();
        put_uint(&mut out, 7);
        put_uint(&mut out, 256);
        put_int(&mut out, -129);
        put_int(&mut out, i64::MIN);
        put_uint(&mut out, u64::MAX);
        assert_eq!(&out[..7], &[0x07, 0xfe, 0x01, 0x00, 0xfe, 0x01, 0x01]);
        let mut c = Cursor {
            bytes: &out,
            pos: 0,
        };
        assert_eq!(c.uint().unwrap(), 7);
        assert_eq!(c.uint().unwrap(), 256);
        assert_eq!(c.int().unwrap(), -129);
        assert_eq!(c.int().unwrap(), i64::MIN);
        assert_eq!(c.uint().unwrap(), u64::MAX);
        assert_eq!(c.remaining(), 0);
        // Nine bytes of integer do not exist.
        let mut c = Cursor {
            bytes: &[0xf7, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            pos: 0,
        };
        assert!(c.uint().is_err());
    }

    #[test]
    fn floats_are_byte_reversed() {
        // Go: 17.0 encodes as FE 31 40.
        let mut c = Cursor {
            bytes: &[0xfe, 0x31, 0x40],
            pos: 0,
        };
        assert_eq!(c.float().unwrap(), 17.0);
    }
}

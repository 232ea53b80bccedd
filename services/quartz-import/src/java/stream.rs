//! The grammar of the stream (Java Object Serialization Specification, chapter 6), read into a
//! [`Graph`]. Handles are assigned in the order `ObjectInputStream` assigns them: a class
//! descriptor's before its fields' type strings, an object's after its class descriptor and
//! before its field values, an enum's before its constant's name.

use super::{
    Annotation, Array, ArrayData, ClassData, ClassDesc, ClassId, FieldDesc, Graph, JavaError,
    Limits, MAGIC, Node, NodeId, Object, SC_BLOCK_DATA, SC_ENUM, SC_EXTERNALIZABLE,
    SC_SERIALIZABLE, SC_WRITE_METHOD, Value,
};

/// The longest field type signature read (a class name in JVM form; real ones are short).
const MAX_TYPE_SIGNATURE: usize = 4096;

const TC_NULL: u8 = 0x70;
const TC_REFERENCE: u8 = 0x71;
const TC_CLASSDESC: u8 = 0x72;
const TC_OBJECT: u8 = 0x73;
const TC_STRING: u8 = 0x74;
const TC_ARRAY: u8 = 0x75;
const TC_CLASS: u8 = 0x76;
const TC_BLOCKDATA: u8 = 0x77;
const TC_ENDBLOCKDATA: u8 = 0x78;
const TC_RESET: u8 = 0x79;
const TC_BLOCKDATALONG: u8 = 0x7A;
const TC_EXCEPTION: u8 = 0x7B;
const TC_LONGSTRING: u8 = 0x7C;
const TC_PROXYCLASSDESC: u8 = 0x7D;
const TC_ENUM: u8 = 0x7E;

/// The first handle a stream assigns.
const BASE_WIRE_HANDLE: u32 = 0x7E_0000;

#[derive(Debug, Clone, Copy)]
enum Handle {
    Class(ClassId),
    Node(NodeId),
}

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
    limits: Limits,
    handles: Vec<Handle>,
    nodes: Vec<Node>,
    classes: Vec<ClassDesc>,
    depth: usize,
    values: usize,
}

pub(super) fn parse(bytes: &[u8], limits: &Limits) -> Result<Graph, JavaError> {
    if !bytes.starts_with(&MAGIC) {
        let found = bytes
            .iter()
            .take(4)
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(" ");
        return Err(JavaError::BadMagic { found });
    }
    let mut reader = Reader {
        input: bytes,
        pos: MAGIC.len(),
        limits: *limits,
        handles: Vec::new(),
        nodes: Vec::new(),
        classes: Vec::new(),
        depth: 0,
        values: 0,
    };
    let root = reader.read_object()?;
    Ok(Graph {
        nodes: reader.nodes,
        classes: reader.classes,
        root,
    })
}

impl<'a> Reader<'a> {
    fn truncated(&self, what: &'static str) -> JavaError {
        JavaError::Truncated {
            offset: self.pos,
            what,
        }
    }

    fn malformed(&self, detail: impl Into<String>) -> JavaError {
        JavaError::Malformed {
            offset: self.pos,
            detail: detail.into(),
        }
    }

    fn unexpected(&self, code: u8, expected: &'static str) -> JavaError {
        JavaError::UnexpectedCode {
            code,
            offset: self.pos,
            expected,
        }
    }

    fn limit(&self, what: &'static str, limit: usize) -> JavaError {
        JavaError::Limit {
            offset: self.pos,
            what,
            limit,
        }
    }

    fn remaining(&self) -> usize {
        self.input.len().saturating_sub(self.pos)
    }

    fn peek(&self, what: &'static str) -> Result<u8, JavaError> {
        self.input
            .get(self.pos)
            .copied()
            .ok_or_else(|| self.truncated(what))
    }

    /// The next `n` bytes (borrowed from the input, not from the reader).
    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], JavaError> {
        let input = self.input;
        let slice = self
            .pos
            .checked_add(n)
            .and_then(|end| input.get(self.pos..end))
            .ok_or_else(|| self.truncated(what))?;
        self.pos += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], JavaError> {
        let at = self.pos;
        let slice = self.bytes(N, what)?;
        <[u8; N]>::try_from(slice).map_err(|_| JavaError::Truncated { offset: at, what })
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, JavaError> {
        Ok(u8::from_be_bytes(self.array(what)?))
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, JavaError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, JavaError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, JavaError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    fn count_values(&mut self, n: usize) -> Result<(), JavaError> {
        self.values = self.values.saturating_add(n);
        if self.values > self.limits.max_values {
            return Err(self.limit("values in the stream", self.limits.max_values));
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), JavaError> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(self.limit("nesting depth", self.limits.max_depth));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn assign(&mut self, handle: Handle) -> Result<(), JavaError> {
        if self.handles.len() >= self.limits.max_handles {
            return Err(self.limit("handles", self.limits.max_handles));
        }
        self.handles.push(handle);
        Ok(())
    }

    fn push_node(&mut self, node: Node) -> Result<NodeId, JavaError> {
        let id = self.nodes.len();
        self.nodes.push(node);
        self.assign(Handle::Node(id))?;
        Ok(id)
    }

    /// `TC_REFERENCE` and its handle (the code already peeked).
    fn read_handle(&mut self) -> Result<(u32, Handle), JavaError> {
        let at = self.pos;
        self.pos += 1;
        let wire = u32::from_be_bytes(self.array("a handle")?);
        let handle = wire
            .checked_sub(BASE_WIRE_HANDLE)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.handles.get(i).copied())
            .ok_or(JavaError::BadHandle {
                handle: wire,
                offset: at,
                why: "no such handle",
            })?;
        Ok((wire, handle))
    }

    /// Any object position (`readObject0`): null, a back-reference, or a new object, string,
    /// array, enum, class or class descriptor. Resets before it are applied.
    fn read_object(&mut self) -> Result<Value, JavaError> {
        self.enter()?;
        let value = self.read_object_inner();
        self.leave();
        value
    }

    fn read_object_inner(&mut self) -> Result<Value, JavaError> {
        loop {
            let code = self.peek("an object")?;
            return match code {
                TC_RESET => {
                    self.pos += 1;
                    self.handles.clear();
                    continue;
                }
                TC_NULL => {
                    self.pos += 1;
                    Ok(Value::Null)
                }
                TC_REFERENCE => match self.read_handle()?.1 {
                    Handle::Node(id) => Ok(Value::Node(id)),
                    Handle::Class(id) => Ok(Value::ClassDesc(id)),
                },
                TC_CLASSDESC => {
                    self.pos += 1;
                    Ok(Value::ClassDesc(self.read_new_class_desc()?))
                }
                TC_OBJECT => self.read_new_object(),
                TC_STRING | TC_LONGSTRING => {
                    let text = self.read_new_string()?;
                    Ok(Value::Node(self.push_node(Node::String(text))?))
                }
                TC_ARRAY => self.read_new_array(),
                TC_ENUM => self.read_new_enum(),
                TC_CLASS => {
                    self.pos += 1;
                    let class = self.read_required_class_desc()?;
                    Ok(Value::Node(self.push_node(Node::Class(class))?))
                }
                TC_PROXYCLASSDESC => Err(JavaError::Unsupported {
                    offset: self.pos,
                    what: "a dynamic proxy class (TC_PROXYCLASSDESC)",
                }),
                TC_EXCEPTION => Err(JavaError::Unsupported {
                    offset: self.pos,
                    what: "an exception written while serializing (TC_EXCEPTION)",
                }),
                TC_BLOCKDATA | TC_BLOCKDATALONG => {
                    Err(self.unexpected(code, "an object, found primitive block data"))
                }
                _ => Err(self.unexpected(code, "an object")),
            };
        }
    }

    /// A class-descriptor position: a new descriptor, a back-reference to one, or null.
    fn read_class_desc(&mut self) -> Result<Option<ClassId>, JavaError> {
        loop {
            let code = self.peek("a class descriptor")?;
            return match code {
                TC_RESET => {
                    self.pos += 1;
                    self.handles.clear();
                    continue;
                }
                TC_NULL => {
                    self.pos += 1;
                    Ok(None)
                }
                TC_CLASSDESC => {
                    self.pos += 1;
                    self.enter()?;
                    let class = self.read_new_class_desc();
                    self.leave();
                    class.map(Some)
                }
                TC_REFERENCE => {
                    let at = self.pos;
                    match self.read_handle()? {
                        (_, Handle::Class(id)) => Ok(Some(id)),
                        (wire, Handle::Node(_)) => Err(JavaError::BadHandle {
                            handle: wire,
                            offset: at,
                            why: "expected a class descriptor",
                        }),
                    }
                }
                TC_PROXYCLASSDESC => Err(JavaError::Unsupported {
                    offset: self.pos,
                    what: "a dynamic proxy class (TC_PROXYCLASSDESC)",
                }),
                _ => Err(self.unexpected(code, "a class descriptor")),
            };
        }
    }

    fn read_required_class_desc(&mut self) -> Result<ClassId, JavaError> {
        self.read_class_desc()?
            .ok_or_else(|| self.malformed("null class descriptor"))
    }

    /// `TC_CLASSDESC` body (the code already read).
    fn read_new_class_desc(&mut self) -> Result<ClassId, JavaError> {
        let name = self.read_utf("a class name")?;
        let serial_version_uid = self.i64("a serialVersionUID")?;
        let id = self.classes.len();
        self.classes.push(ClassDesc {
            name,
            serial_version_uid,
            flags: 0,
            fields: Vec::new(),
            annotation: Annotation::default(),
            super_class: None,
        });
        self.assign(Handle::Class(id))?;
        let flags = self.u8("class flags")?;
        if flags & SC_SERIALIZABLE != 0 && flags & SC_EXTERNALIZABLE != 0 {
            return Err(self.malformed("class is both serializable and externalizable"));
        }
        let count = usize::from(self.u16("a field count")?);
        // A field descriptor takes at least 3 bytes: check before allocating for them.
        if count.saturating_mul(3) > self.remaining() {
            return Err(self.truncated("field descriptors"));
        }
        self.count_values(count)?;
        let mut fields = Vec::with_capacity(count);
        for _ in 0..count {
            let type_code = self.u8("a field type")?;
            let name = self.read_utf("a field name")?;
            let class_name = match type_code {
                b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z' => None,
                b'L' | b'[' => Some(self.read_type_string()?),
                other => {
                    return Err(
                        self.malformed(format!("field {name:?} has type code 0x{other:02X}"))
                    );
                }
            };
            fields.push(FieldDesc {
                name,
                type_code,
                class_name,
            });
        }
        let annotation = self.read_annotation()?;
        let super_class = self.read_class_desc()?;
        let desc = self
            .classes
            .get_mut(id)
            .ok_or_else(|| JavaError::Malformed {
                offset: 0,
                detail: "class table out of step".into(),
            })?;
        desc.flags = flags;
        desc.fields = fields;
        desc.annotation = annotation;
        desc.super_class = super_class;
        Ok(id)
    }

    /// A field's type signature: a string or a back-reference to one, at most
    /// [`MAX_TYPE_SIGNATURE`] bytes (each field keeps its own copy).
    fn read_type_string(&mut self) -> Result<String, JavaError> {
        let at = self.pos;
        let text = self.read_type_string_unbounded()?;
        if text.len() > MAX_TYPE_SIGNATURE {
            return Err(JavaError::Malformed {
                offset: at,
                detail: format!(
                    "a field type signature of {} bytes (at most {MAX_TYPE_SIGNATURE})",
                    text.len()
                ),
            });
        }
        Ok(text)
    }

    fn read_type_string_unbounded(&mut self) -> Result<String, JavaError> {
        let code = self.peek("a field type signature")?;
        match code {
            TC_STRING | TC_LONGSTRING => {
                let text = self.read_new_string()?;
                self.push_node(Node::String(text.clone()))?;
                Ok(text)
            }
            TC_REFERENCE => {
                let at = self.pos;
                let (wire, handle) = self.read_handle()?;
                match handle {
                    Handle::Node(id) => match self.nodes.get(id) {
                        Some(Node::String(s)) => Ok(s.clone()),
                        _ => Err(JavaError::BadHandle {
                            handle: wire,
                            offset: at,
                            why: "expected a string",
                        }),
                    },
                    Handle::Class(_) => Err(JavaError::BadHandle {
                        handle: wire,
                        offset: at,
                        why: "expected a string",
                    }),
                }
            }
            _ => Err(self.unexpected(code, "a string")),
        }
    }

    /// Block data and objects up to `TC_ENDBLOCKDATA`.
    fn read_annotation(&mut self) -> Result<Annotation, JavaError> {
        let mut annotation = Annotation::default();
        loop {
            match self.peek("an annotation (missing TC_ENDBLOCKDATA)")? {
                TC_ENDBLOCKDATA => {
                    self.pos += 1;
                    return Ok(annotation);
                }
                TC_BLOCKDATA => {
                    self.pos += 1;
                    let len = usize::from(self.u8("a block length")?);
                    let chunk = self.bytes(len, "block data")?;
                    annotation.data.extend_from_slice(chunk);
                }
                TC_BLOCKDATALONG => {
                    self.pos += 1;
                    let len = self.i32("a block length")?;
                    let len = usize::try_from(len)
                        .map_err(|_| self.malformed(format!("negative block length {len}")))?;
                    let chunk = self.bytes(len, "block data")?;
                    annotation.data.extend_from_slice(chunk);
                }
                _ => {
                    self.count_values(1)?;
                    let value = self.read_object()?;
                    annotation.objects.push(value);
                }
            }
        }
    }

    /// The serializable classes of `class`'s chain, top-most first.
    fn chain(&self, class: ClassId) -> Result<Vec<ClassId>, JavaError> {
        let mut chain = Vec::new();
        let mut next = Some(class);
        while let Some(id) = next {
            if chain.contains(&id) {
                return Err(self.malformed("class hierarchy is cyclic"));
            }
            if chain.len() >= self.limits.max_depth {
                return Err(self.limit("class hierarchy depth", self.limits.max_depth));
            }
            chain.push(id);
            next = self.classes.get(id).and_then(|c| c.super_class);
        }
        chain.reverse();
        Ok(chain)
    }

    fn class_flags(&self, id: ClassId) -> u8 {
        self.classes.get(id).map_or(0, |c| c.flags)
    }

    /// `TC_OBJECT` (the code peeked).
    fn read_new_object(&mut self) -> Result<Value, JavaError> {
        self.pos += 1;
        let class = self.read_required_class_desc()?;
        let flags = self.class_flags(class);
        if flags & SC_ENUM != 0 {
            return Err(self.malformed("an enum class written as an ordinary object"));
        }
        let id = self.push_node(Node::Object(Object {
            class,
            data: Vec::new(),
        }))?;
        let mut data = Vec::new();
        if flags & SC_EXTERNALIZABLE != 0 {
            if flags & SC_BLOCK_DATA == 0 {
                return Err(JavaError::Unsupported {
                    offset: self.pos,
                    what: "externalizable data without block data (protocol version 1)",
                });
            }
            data.push(ClassData {
                class,
                values: Vec::new(),
                annotation: Some(self.read_annotation()?),
            });
        } else {
            let chain = self.chain(class)?;
            self.count_values(chain.len())?;
            for link in chain {
                data.push(self.read_class_data(link)?);
            }
        }
        if let Some(Node::Object(object)) = self.nodes.get_mut(id) {
            object.data = data;
        }
        Ok(Value::Node(id))
    }

    /// One class's part of an object: its fields, then what its `writeObject` wrote.
    fn read_class_data(&mut self, class: ClassId) -> Result<ClassData, JavaError> {
        let Some(desc) = self.classes.get(class) else {
            return Err(self.malformed("unknown class"));
        };
        let flags = desc.flags;
        if flags & SC_SERIALIZABLE == 0 {
            return Ok(ClassData {
                class,
                values: Vec::new(),
                annotation: None,
            });
        }
        let types: Vec<u8> = desc.fields.iter().map(|f| f.type_code).collect();
        self.count_values(types.len())?;
        let mut values = Vec::with_capacity(types.len());
        for type_code in types {
            values.push(self.read_field_value(type_code)?);
        }
        let annotation = if flags & SC_WRITE_METHOD != 0 {
            Some(self.read_annotation()?)
        } else {
            None
        };
        Ok(ClassData {
            class,
            values,
            annotation,
        })
    }

    fn read_field_value(&mut self, type_code: u8) -> Result<Value, JavaError> {
        Ok(match type_code {
            b'B' => Value::Byte(i8::from_be_bytes(self.array("a byte field")?)),
            b'C' => Value::Char(self.u16("a char field")?),
            b'D' => Value::Double(f64::from_be_bytes(self.array("a double field")?)),
            b'F' => Value::Float(f32::from_be_bytes(self.array("a float field")?)),
            b'I' => Value::Int(self.i32("an int field")?),
            b'J' => Value::Long(self.i64("a long field")?),
            b'S' => Value::Short(i16::from_be_bytes(self.array("a short field")?)),
            b'Z' => Value::Bool(self.u8("a boolean field")? != 0),
            _ => self.read_object()?,
        })
    }

    /// `TC_ARRAY` (the code peeked).
    fn read_new_array(&mut self) -> Result<Value, JavaError> {
        self.pos += 1;
        let class = self.read_required_class_desc()?;
        let element = match self.classes.get(class).map(|c| c.name.as_bytes()) {
            Some([b'[', element, ..]) => *element,
            _ => return Err(self.malformed("array of a class that is not an array class")),
        };
        let id = self.push_node(Node::Array(Array {
            class,
            data: ArrayData::Object(Vec::new()),
        }))?;
        let len = self.i32("an array length")?;
        let len = usize::try_from(len)
            .map_err(|_| self.malformed(format!("negative array length {len}")))?;
        if len > self.limits.max_array_len {
            return Err(self.limit("array length", self.limits.max_array_len));
        }
        let data = match element {
            b'Z' => ArrayData::Bool(self.primitives(len, |[b]: [u8; 1]| b != 0)?),
            b'B' => ArrayData::Byte(self.primitives(len, u8::from_be_bytes)?),
            b'C' => ArrayData::Char(self.primitives(len, u16::from_be_bytes)?),
            b'S' => ArrayData::Short(self.primitives(len, i16::from_be_bytes)?),
            b'I' => ArrayData::Int(self.primitives(len, i32::from_be_bytes)?),
            b'J' => ArrayData::Long(self.primitives(len, i64::from_be_bytes)?),
            b'F' => ArrayData::Float(self.primitives(len, f32::from_be_bytes)?),
            b'D' => ArrayData::Double(self.primitives(len, f64::from_be_bytes)?),
            b'L' | b'[' => {
                // Each element takes at least one byte (TC_NULL).
                if len > self.remaining() {
                    return Err(self.truncated("array elements"));
                }
                self.count_values(len)?;
                let mut elements = Vec::with_capacity(len);
                for _ in 0..len {
                    elements.push(self.read_object()?);
                }
                ArrayData::Object(elements)
            }
            other => {
                return Err(self.malformed(format!(
                    "array element type 0x{other:02X} is not a Java type"
                )));
            }
        };
        if let Some(Node::Array(array)) = self.nodes.get_mut(id) {
            array.data = data;
        }
        Ok(Value::Node(id))
    }

    fn primitives<const N: usize, T>(
        &mut self,
        len: usize,
        convert: impl Fn([u8; N]) -> T,
    ) -> Result<Vec<T>, JavaError> {
        let total = len
            .checked_mul(N)
            .ok_or_else(|| self.truncated("array elements"))?;
        let bytes = self.bytes(total, "array elements")?;
        Ok(bytes
            .chunks_exact(N)
            .filter_map(|chunk| <[u8; N]>::try_from(chunk).ok())
            .map(convert)
            .collect())
    }

    /// `TC_ENUM` (the code peeked).
    fn read_new_enum(&mut self) -> Result<Value, JavaError> {
        self.pos += 1;
        let class = self.read_required_class_desc()?;
        let id = self.push_node(Node::Enum {
            class,
            constant: String::new(),
        })?;
        let constant = self.read_type_string()?;
        if let Some(Node::Enum { constant: slot, .. }) = self.nodes.get_mut(id) {
            *slot = constant;
        }
        Ok(Value::Node(id))
    }

    /// `TC_STRING` or `TC_LONGSTRING` with its text (the code peeked).
    fn read_new_string(&mut self) -> Result<String, JavaError> {
        let code = self.u8("a string")?;
        let len = if code == TC_LONGSTRING {
            let len = self.i64("a long string length")?;
            usize::try_from(len).map_err(|_| self.malformed(format!("long string length {len}")))?
        } else {
            usize::from(self.u16("a string length")?)
        };
        let at = self.pos;
        let bytes = self.bytes(len, "string bytes")?;
        decode_modified_utf8(bytes).map_err(|i| JavaError::Malformed {
            offset: at + i,
            detail: "invalid modified UTF-8".into(),
        })
    }

    /// A `writeUTF` string (class and field names).
    fn read_utf(&mut self, what: &'static str) -> Result<String, JavaError> {
        let len = usize::from(self.u16(what)?);
        let at = self.pos;
        let bytes = self.bytes(len, what)?;
        decode_modified_utf8(bytes).map_err(|i| JavaError::Malformed {
            offset: at + i,
            detail: format!("{what} is not valid modified UTF-8"),
        })
    }
}

/// Decodes Java's modified UTF-8: NUL as `C0 80`, characters beyond the BMP as two 3-byte
/// surrogates (CESU-8). An unpaired surrogate becomes U+FFFD. Err: the offset of a malformed
/// byte (`DataInputStream.readUTF` refuses those too).
pub(super) fn decode_modified_utf8(bytes: &[u8]) -> Result<String, usize> {
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b0) = bytes.get(i) {
        let continuation = |at: usize| -> Result<u16, usize> {
            match bytes.get(at) {
                Some(&b) if b & 0xC0 == 0x80 => Ok(u16::from(b & 0x3F)),
                _ => Err(at),
            }
        };
        match b0 >> 4 {
            0..=7 => {
                units.push(u16::from(b0));
                i += 1;
            }
            12 | 13 => {
                units.push((u16::from(b0 & 0x1F) << 6) | continuation(i + 1)?);
                i += 2;
            }
            14 => {
                units.push(
                    (u16::from(b0 & 0x0F) << 12)
                        | (continuation(i + 1)? << 6)
                        | continuation(i + 2)?,
                );
                i += 3;
            }
            _ => return Err(i),
        }
    }
    Ok(char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect())
}

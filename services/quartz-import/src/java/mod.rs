//! A reader of the Java Object Serialization stream (protocol 2, what `ObjectOutputStream`
//! writes), for the blobs Quartz keeps in its job store.
//!
//! It builds a graph of values and never loads, runs or resolves a class: a class is only a name
//! with field descriptors. Values are found by field name across the class chain (classes evolve
//! between Quartz and JDK versions, so positions mean nothing). What a class's `writeObject`
//! wrote is kept per class as an [`Annotation`]: its block data as one byte stream (a writer's
//! primitives may be split across chunks) and its objects in order, read back with
//! [`AnnotationReader`] as the class's `readObject` would.
//!
//! The input is untrusted: every length is checked against what is left of the input before
//! anything is allocated, and [`Limits`] bound nesting, handles and values, so a hostile or
//! truncated blob gives an error, never a panic or an unbounded allocation.
//!
//! [`jdk`] reads the JDK classes the Quartz blobs contain (boxed numbers, dates, collections,
//! time zones, big numbers).

pub mod jdk;
mod stream;

use std::fmt;

/// The first four bytes of every stream: magic `AC ED`, protocol version 5.
pub const MAGIC: [u8; 4] = [0xAC, 0xED, 0x00, 0x05];

/// Default for [`Limits::max_depth`].
pub const DEFAULT_MAX_DEPTH: usize = 64;
/// Default for [`Limits::max_handles`].
pub const DEFAULT_MAX_HANDLES: usize = 100_000;
/// Default for [`Limits::max_array_len`].
pub const DEFAULT_MAX_ARRAY_LEN: usize = 1_000_000;
/// Default for [`Limits::max_values`].
pub const DEFAULT_MAX_VALUES: usize = 2_000_000;

/// Hard limits on what one stream may contain (the input length bounds the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Nesting of objects and class descriptors (the reader recurses this deep at most).
    pub max_depth: usize,
    /// Back-reference handles assigned between resets.
    pub max_handles: usize,
    /// Elements of one array.
    pub max_array_len: usize,
    /// Field values, array elements and annotation objects in the whole stream: a bound on
    /// memory, since a few bytes of input can stand for many values (a shared class with many
    /// fields, a deep class chain).
    pub max_values: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_depth: DEFAULT_MAX_DEPTH,
            max_handles: DEFAULT_MAX_HANDLES,
            max_array_len: DEFAULT_MAX_ARRAY_LEN,
            max_values: DEFAULT_MAX_VALUES,
        }
    }
}

/// A stream that cannot be read, or a value that is not shaped as its class should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JavaError {
    /// The stream does not start with `AC ED 00 05`.
    #[error("not a Java serialization stream (starts with {found}, expected AC ED 00 05)")]
    BadMagic {
        /// The first bytes, in hex.
        found: String,
    },
    /// The input ends inside a value.
    #[error("Java stream truncated at byte {offset} while reading {what}")]
    Truncated {
        /// Where the missing bytes start.
        offset: usize,
        /// What was being read.
        what: &'static str,
    },
    /// A type code that cannot stand where it stands.
    #[error("unexpected type code 0x{code:02X} at byte {offset} (expected {expected})")]
    UnexpectedCode {
        /// The code.
        code: u8,
        /// Where it is.
        offset: usize,
        /// What could have stood there.
        expected: &'static str,
    },
    /// A construct this reader refuses (proxies, exceptions, protocol-1 externalizables).
    #[error("unsupported at byte {offset}: {what}")]
    Unsupported {
        /// Where it is.
        offset: usize,
        /// What it is.
        what: &'static str,
    },
    /// A back-reference to a handle that does not exist or is of the wrong kind.
    #[error("bad back-reference 0x{handle:08X} at byte {offset}: {why}")]
    BadHandle {
        /// The handle as written.
        handle: u32,
        /// Where it is.
        offset: usize,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Anything else wrong with the stream's grammar.
    #[error("malformed Java stream at byte {offset}: {detail}")]
    Malformed {
        /// Where.
        offset: usize,
        /// What.
        detail: String,
    },
    /// One of the [`Limits`] is exceeded.
    #[error("Java stream exceeds a limit at byte {offset}: {what} (limit {limit})")]
    Limit {
        /// Where.
        offset: usize,
        /// Which limit.
        what: &'static str,
        /// Its value.
        limit: usize,
    },
    /// A value read well but not shaped as its class should be (a missing field, an
    /// annotation shorter than its `readObject` reads).
    #[error("{class}: {detail}")]
    Shape {
        /// The class whose value it is.
        class: String,
        /// What is wrong.
        detail: String,
    },
}

impl JavaError {
    /// A [`JavaError::Shape`] for `class`.
    pub fn shape(class: &str, detail: impl Into<String>) -> Self {
        Self::Shape {
            class: class.to_string(),
            detail: detail.into(),
        }
    }
}

/// Class-descriptor flag: the class has a `writeObject` method (an annotation follows its
/// fields).
pub const SC_WRITE_METHOD: u8 = 0x01;
/// Class-descriptor flag: `Serializable`.
pub const SC_SERIALIZABLE: u8 = 0x02;
/// Class-descriptor flag: `Externalizable`.
pub const SC_EXTERNALIZABLE: u8 = 0x04;
/// Class-descriptor flag: externalizable data written in block-data mode (protocol 2).
pub const SC_BLOCK_DATA: u8 = 0x08;
/// Class-descriptor flag: an enum type.
pub const SC_ENUM: u8 = 0x10;

/// A class as the stream describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassDesc {
    /// The binary name (`java.util.HashMap`, `[B`, `MakeBlobs$Pojo`).
    pub name: String,
    /// The writer's `serialVersionUID`.
    pub serial_version_uid: i64,
    /// `SC_*` flags.
    pub flags: u8,
    /// The serialized fields, in stream order (primitives first, then objects, each by name).
    pub fields: Vec<FieldDesc>,
    /// What `annotateClass` wrote (nearly always nothing).
    pub annotation: Annotation,
    super_class: Option<ClassId>,
}

/// A serialized field of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDesc {
    /// The field's name.
    pub name: String,
    /// Its type code: `B C D F I J S Z` for primitives, `L` for an object, `[` for an array.
    pub type_code: u8,
    /// For `L` and `[`: the JVM type signature (`Ljava/lang/String;`).
    pub class_name: Option<String>,
}

/// What a class's `writeObject` (or an externalizable's `writeExternal`, or `annotateClass`)
/// wrote after its fields: block data concatenated into one byte stream, and the objects in
/// order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Annotation {
    data: Vec<u8>,
    objects: Vec<Value>,
}

impl Annotation {
    /// The block data, all chunks concatenated.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// How many objects it holds.
    pub fn object_count(&self) -> usize {
        self.objects.len()
    }
}

type NodeId = usize;
type ClassId = usize;

/// A value as stored in the graph; objects, strings and arrays are nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    Null,
    Bool(bool),
    Byte(i8),
    Char(u16),
    Short(i16),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Node(NodeId),
    /// A class descriptor read where an object was expected (an `ObjectStreamClass` value).
    ClassDesc(ClassId),
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    String(String),
    Object(Object),
    Array(Array),
    Enum {
        class: ClassId,
        constant: String,
    },
    /// A `java.lang.Class` value (`TC_CLASS`).
    Class(ClassId),
}

#[derive(Debug, Clone, PartialEq)]
struct Object {
    class: ClassId,
    /// One entry per class of the chain, top-most serializable superclass first.
    data: Vec<ClassData>,
}

#[derive(Debug, Clone, PartialEq)]
struct ClassData {
    class: ClassId,
    /// Aligned with the class's field descriptors.
    values: Vec<Value>,
    annotation: Option<Annotation>,
}

#[derive(Debug, Clone, PartialEq)]
struct Array {
    class: ClassId,
    data: ArrayData,
}

#[derive(Debug, Clone, PartialEq)]
enum ArrayData {
    Bool(Vec<bool>),
    Byte(Vec<u8>),
    Char(Vec<u16>),
    Short(Vec<i16>),
    Int(Vec<i32>),
    Long(Vec<i64>),
    Float(Vec<f32>),
    Double(Vec<f64>),
    Object(Vec<Value>),
}

/// A parsed stream: the first object in it and everything that object reaches.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    nodes: Vec<Node>,
    classes: Vec<ClassDesc>,
    root: Value,
}

/// Whether `bytes` start as a Java serialization stream does (`AC ED`).
pub fn looks_serialized(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC[..2])
}

impl Graph {
    /// Reads the first object of a stream with the default [`Limits`]. Bytes after it are
    /// ignored, as `ObjectInputStream.readObject` ignores them.
    pub fn parse(bytes: &[u8]) -> Result<Self, JavaError> {
        Self::parse_with_limits(bytes, &Limits::default())
    }

    /// Reads the first object of a stream within `limits`.
    pub fn parse_with_limits(bytes: &[u8], limits: &Limits) -> Result<Self, JavaError> {
        stream::parse(bytes, limits)
    }

    /// The object the stream holds.
    pub fn root(&self) -> JValue<'_> {
        self.view(self.root)
    }

    fn view(&self, value: Value) -> JValue<'_> {
        match value {
            Value::Null => JValue::Null,
            Value::Bool(v) => JValue::Bool(v),
            Value::Byte(v) => JValue::Byte(v),
            Value::Char(v) => JValue::Char(v),
            Value::Short(v) => JValue::Short(v),
            Value::Int(v) => JValue::Int(v),
            Value::Long(v) => JValue::Long(v),
            Value::Float(v) => JValue::Float(v),
            Value::Double(v) => JValue::Double(v),
            Value::ClassDesc(id) => self.class_view(id).map_or(JValue::Null, JValue::ClassDesc),
            Value::Node(id) => match self.nodes.get(id) {
                None => JValue::Null,
                Some(Node::String(s)) => JValue::String(s),
                Some(Node::Object(object)) => JValue::Object(JObject {
                    graph: self,
                    id,
                    object,
                }),
                Some(Node::Array(array)) => JValue::Array(JArray {
                    graph: self,
                    id,
                    array,
                }),
                Some(Node::Enum { class, constant }) => JValue::Enum(JEnum {
                    class_name: self.class_view(*class).map_or("", |c| c.name.as_str()),
                    constant,
                }),
                Some(Node::Class(class)) => {
                    self.class_view(*class).map_or(JValue::Null, JValue::Class)
                }
            },
        }
    }

    fn class_view(&self, id: ClassId) -> Option<&ClassDesc> {
        self.classes.get(id)
    }
}

/// A value of a parsed stream.
#[derive(Debug, Clone, Copy)]
pub enum JValue<'g> {
    /// `null`.
    Null,
    /// A `boolean` field or element.
    Bool(bool),
    /// A `byte`.
    Byte(i8),
    /// A `char` (a UTF-16 code unit).
    Char(u16),
    /// A `short`.
    Short(i16),
    /// An `int`.
    Int(i32),
    /// A `long`.
    Long(i64),
    /// A `float`.
    Float(f32),
    /// A `double`.
    Double(f64),
    /// A `java.lang.String`.
    String(&'g str),
    /// Any other object.
    Object(JObject<'g>),
    /// An array.
    Array(JArray<'g>),
    /// An enum constant.
    Enum(JEnum<'g>),
    /// A `java.lang.Class` value.
    Class(&'g ClassDesc),
    /// An `ObjectStreamClass` value (a class descriptor written as an object).
    ClassDesc(&'g ClassDesc),
}

impl<'g> JValue<'g> {
    /// The Java type: a class name, or a primitive's keyword.
    pub fn type_name(&self) -> &'g str {
        match self {
            JValue::Null => "null",
            JValue::Bool(_) => "boolean",
            JValue::Byte(_) => "byte",
            JValue::Char(_) => "char",
            JValue::Short(_) => "short",
            JValue::Int(_) => "int",
            JValue::Long(_) => "long",
            JValue::Float(_) => "float",
            JValue::Double(_) => "double",
            JValue::String(_) => "java.lang.String",
            JValue::Object(o) => o.class_name(),
            JValue::Array(a) => a.class_name(),
            JValue::Enum(e) => e.class_name,
            JValue::Class(_) => "java.lang.Class",
            JValue::ClassDesc(_) => "java.io.ObjectStreamClass",
        }
    }

    /// Whether it is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, JValue::Null)
    }

    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&'g str> {
        match self {
            JValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The object, if it is one (strings, arrays and enums are not).
    pub fn as_object(&self) -> Option<JObject<'g>> {
        match self {
            JValue::Object(o) => Some(*o),
            _ => None,
        }
    }
}

/// An object of a parsed stream.
#[derive(Clone, Copy)]
pub struct JObject<'g> {
    graph: &'g Graph,
    id: NodeId,
    object: &'g Object,
}

impl fmt::Debug for JObject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JObject({}#{})", self.class_name(), self.id)
    }
}

impl<'g> JObject<'g> {
    /// An identity within its graph (the same object reached twice has the same id).
    pub fn id(&self) -> usize {
        self.id
    }

    /// The concrete class's name.
    pub fn class_name(&self) -> &'g str {
        self.class().map_or("", |c| c.name.as_str())
    }

    /// The concrete class's descriptor.
    pub fn class(&self) -> Option<&'g ClassDesc> {
        self.graph.class_view(self.object.class)
    }

    /// The serializable classes of the chain, concrete class first.
    pub fn class_chain(&self) -> impl Iterator<Item = &'g ClassDesc> + 'g {
        let graph = self.graph;
        self.object
            .data
            .iter()
            .rev()
            .filter_map(move |d| graph.class_view(d.class))
    }

    /// Whether the class or one of its serializable superclasses is `class`.
    pub fn is_instance_of(&self, class: &str) -> bool {
        self.class_chain().any(|c| c.name == class)
    }

    /// The value of the field `name`, looked for from the concrete class up (a subclass's
    /// field hides a superclass's of the same name). None: no class of the chain has it.
    pub fn field(&self, name: &str) -> Option<JValue<'g>> {
        self.object
            .data
            .iter()
            .rev()
            .find_map(|data| self.field_of_data(data, name))
    }

    /// The value of the field `name` declared by `class`.
    pub fn field_in(&self, class: &str, name: &str) -> Option<JValue<'g>> {
        self.class_data(class)
            .and_then(|data| self.field_of_data(data, name))
    }

    fn field_of_data(&self, data: &'g ClassData, name: &str) -> Option<JValue<'g>> {
        let desc = self.graph.class_view(data.class)?;
        let index = desc.fields.iter().position(|f| f.name == name)?;
        data.values.get(index).map(|v| self.graph.view(*v))
    }

    fn class_data(&self, class: &str) -> Option<&'g ClassData> {
        self.object.data.iter().find(|d| {
            self.graph
                .class_view(d.class)
                .is_some_and(|c| c.name == class)
        })
    }

    /// What `class`'s `writeObject` wrote for this object. None: `class` is not in the chain
    /// or wrote no annotation.
    pub fn annotation(&self, class: &str) -> Option<AnnotationReader<'g>> {
        let data = self.class_data(class)?;
        let annotation = data.annotation.as_ref()?;
        let class = self.graph.class_view(data.class)?;
        Some(AnnotationReader::new(self.graph, &class.name, annotation))
    }

    /// A field that must hold an object (or null), else a [`JavaError::Shape`].
    pub fn object_field(&self, name: &str) -> Result<Option<JObject<'g>>, JavaError> {
        match self.required(name)? {
            JValue::Null => Ok(None),
            JValue::Object(o) => Ok(Some(o)),
            other => Err(self.wrong_type(name, "an object", other)),
        }
    }

    /// A field that must hold a string (or null).
    pub fn string_field(&self, name: &str) -> Result<Option<&'g str>, JavaError> {
        match self.required(name)? {
            JValue::Null => Ok(None),
            JValue::String(s) => Ok(Some(s)),
            other => Err(self.wrong_type(name, "a string", other)),
        }
    }

    /// An `int` field.
    pub fn int_field(&self, name: &str) -> Result<i32, JavaError> {
        match self.required(name)? {
            JValue::Int(v) => Ok(v),
            other => Err(self.wrong_type(name, "an int", other)),
        }
    }

    /// A `long` field.
    pub fn long_field(&self, name: &str) -> Result<i64, JavaError> {
        match self.required(name)? {
            JValue::Long(v) => Ok(v),
            other => Err(self.wrong_type(name, "a long", other)),
        }
    }

    /// A `boolean` field.
    pub fn bool_field(&self, name: &str) -> Result<bool, JavaError> {
        match self.required(name)? {
            JValue::Bool(v) => Ok(v),
            other => Err(self.wrong_type(name, "a boolean", other)),
        }
    }

    /// A field that must exist.
    pub fn required(&self, name: &str) -> Result<JValue<'g>, JavaError> {
        self.field(name)
            .ok_or_else(|| JavaError::shape(self.class_name(), format!("has no field {name:?}")))
    }

    fn wrong_type(&self, name: &str, expected: &str, found: JValue<'_>) -> JavaError {
        JavaError::shape(
            self.class_name(),
            format!(
                "field {name:?} holds {}, expected {expected}",
                found.type_name()
            ),
        )
    }
}

/// An array of a parsed stream.
#[derive(Clone, Copy)]
pub struct JArray<'g> {
    graph: &'g Graph,
    id: NodeId,
    array: &'g Array,
}

impl fmt::Debug for JArray<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "JArray({}#{}, {})",
            self.class_name(),
            self.id,
            self.len()
        )
    }
}

impl<'g> JArray<'g> {
    /// An identity within its graph.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The array class's name (`[B`, `[Ljava.lang.String;`).
    pub fn class_name(&self) -> &'g str {
        self.graph
            .class_view(self.array.class)
            .map_or("", |c| c.name.as_str())
    }

    /// The element type code: `B C D F I J S Z`, or `L`/`[` for objects.
    pub fn element_type(&self) -> u8 {
        match &self.array.data {
            ArrayData::Bool(_) => b'Z',
            ArrayData::Byte(_) => b'B',
            ArrayData::Char(_) => b'C',
            ArrayData::Short(_) => b'S',
            ArrayData::Int(_) => b'I',
            ArrayData::Long(_) => b'J',
            ArrayData::Float(_) => b'F',
            ArrayData::Double(_) => b'D',
            ArrayData::Object(_) => b'L',
        }
    }

    /// How many elements.
    pub fn len(&self) -> usize {
        match &self.array.data {
            ArrayData::Bool(v) => v.len(),
            ArrayData::Byte(v) => v.len(),
            ArrayData::Char(v) => v.len(),
            ArrayData::Short(v) => v.len(),
            ArrayData::Int(v) => v.len(),
            ArrayData::Long(v) => v.len(),
            ArrayData::Float(v) => v.len(),
            ArrayData::Double(v) => v.len(),
            ArrayData::Object(v) => v.len(),
        }
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<JValue<'g>> {
        let value = match &self.array.data {
            ArrayData::Bool(v) => JValue::Bool(*v.get(i)?),
            ArrayData::Byte(v) => JValue::Byte(i8::from_be_bytes([*v.get(i)?])),
            ArrayData::Char(v) => JValue::Char(*v.get(i)?),
            ArrayData::Short(v) => JValue::Short(*v.get(i)?),
            ArrayData::Int(v) => JValue::Int(*v.get(i)?),
            ArrayData::Long(v) => JValue::Long(*v.get(i)?),
            ArrayData::Float(v) => JValue::Float(*v.get(i)?),
            ArrayData::Double(v) => JValue::Double(*v.get(i)?),
            ArrayData::Object(v) => self.graph.view(*v.get(i)?),
        };
        Some(value)
    }

    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = JValue<'g>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// A `byte[]`'s bytes.
    pub fn bytes(&self) -> Option<&'g [u8]> {
        match &self.array.data {
            ArrayData::Byte(v) => Some(v),
            _ => None,
        }
    }

    /// A `boolean[]`'s elements.
    pub fn booleans(&self) -> Option<&'g [bool]> {
        match &self.array.data {
            ArrayData::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// A `char[]`'s UTF-16 code units.
    pub fn chars(&self) -> Option<&'g [u16]> {
        match &self.array.data {
            ArrayData::Char(v) => Some(v),
            _ => None,
        }
    }
}

/// An enum constant.
#[derive(Debug, Clone, Copy)]
pub struct JEnum<'g> {
    /// The enum type's name.
    pub class_name: &'g str,
    /// The constant's name.
    pub constant: &'g str,
}

/// Reads an [`Annotation`] as a `readObject` would: primitives from the block data, objects in
/// order, each with its own cursor.
#[derive(Debug, Clone)]
pub struct AnnotationReader<'g> {
    graph: &'g Graph,
    class: &'g str,
    data: &'g [u8],
    pos: usize,
    objects: &'g [Value],
    next_object: usize,
}

impl<'g> AnnotationReader<'g> {
    fn new(graph: &'g Graph, class: &'g str, annotation: &'g Annotation) -> Self {
        Self {
            graph,
            class,
            data: &annotation.data,
            pos: 0,
            objects: &annotation.objects,
            next_object: 0,
        }
    }

    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], JavaError> {
        let bytes = self
            .pos
            .checked_add(N)
            .and_then(|end| self.data.get(self.pos..end))
            .and_then(|slice| <[u8; N]>::try_from(slice).ok())
            .ok_or_else(|| {
                JavaError::shape(
                    self.class,
                    format!(
                        "writeObject data ends at byte {} of {} while reading {what}",
                        self.pos,
                        self.data.len()
                    ),
                )
            })?;
        self.pos += N;
        Ok(bytes)
    }

    /// `readByte`.
    pub fn read_u8(&mut self) -> Result<u8, JavaError> {
        Ok(u8::from_be_bytes(self.take::<1>("a byte")?))
    }

    /// `readBoolean`.
    pub fn read_bool(&mut self) -> Result<bool, JavaError> {
        Ok(self.read_u8()? != 0)
    }

    /// `readShort`.
    pub fn read_i16(&mut self) -> Result<i16, JavaError> {
        Ok(i16::from_be_bytes(self.take("a short")?))
    }

    /// `readInt`.
    pub fn read_i32(&mut self) -> Result<i32, JavaError> {
        Ok(i32::from_be_bytes(self.take("an int")?))
    }

    /// `readLong`.
    pub fn read_i64(&mut self) -> Result<i64, JavaError> {
        Ok(i64::from_be_bytes(self.take("a long")?))
    }

    /// `readFloat`.
    pub fn read_f32(&mut self) -> Result<f32, JavaError> {
        Ok(f32::from_be_bytes(self.take("a float")?))
    }

    /// `readDouble`.
    pub fn read_f64(&mut self) -> Result<f64, JavaError> {
        Ok(f64::from_be_bytes(self.take("a double")?))
    }

    /// `readObject`: the next object of the annotation.
    pub fn read_object(&mut self) -> Result<JValue<'g>, JavaError> {
        let value = self.objects.get(self.next_object).ok_or_else(|| {
            JavaError::shape(
                self.class,
                format!(
                    "writeObject data has {} objects, reading one more",
                    self.objects.len()
                ),
            )
        })?;
        self.next_object += 1;
        Ok(self.graph.view(*value))
    }

    /// Block-data bytes not read yet.
    pub fn remaining_bytes(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// Objects not read yet.
    pub fn remaining_objects(&self) -> usize {
        self.objects.len().saturating_sub(self.next_object)
    }
}

#[cfg(test)]
mod tests;

//! A small YAML tree with positions, built from `saphyr-parser`'s spanned
//! events: just enough to walk a workflow (maps, sequences, scalars) and to
//! map a position inside a scalar back to the file (block scalars `|`/`>`
//! included).

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, SpannedEventReceiver};

/// Nesting beyond this is refused (a workflow is a few levels deep).
const MAX_DEPTH: usize = 200;

/// A node. Positions are 1-based lines and 1-based columns (characters).
#[derive(Debug, Clone)]
pub enum Node {
    Scalar(Scalar),
    Seq(Vec<Node>, Pos),
    Map(Vec<(Node, Node)>, Pos),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone)]
pub struct Scalar {
    pub value: String,
    pub style: ScalarStyle,
    /// Start and end of the scalar's content (for block scalars: the first
    /// content line, at the block's indentation).
    pub start: Pos,
    pub end: Pos,
}

impl Node {
    pub fn pos(&self) -> Pos {
        match self {
            Node::Scalar(s) => s.start,
            Node::Seq(_, p) | Node::Map(_, p) => *p,
        }
    }
    /// The value of `key` in a map.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries, _) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(&s.value),
            _ => None,
        }
    }
    pub fn as_scalar(&self) -> Option<&Scalar> {
        match self {
            Node::Scalar(s) => Some(s),
            _ => None,
        }
    }
    pub fn entries(&self) -> &[(Node, Node)] {
        match self {
            Node::Map(e, _) => e,
            _ => &[],
        }
    }
    pub fn items(&self) -> &[Node] {
        match self {
            Node::Seq(i, _) => i,
            _ => &[],
        }
    }
}

/// A parse failure with its position.
#[derive(Debug)]
pub struct YamlError {
    pub pos: Pos,
    pub message: String,
}

fn pos_of(m: saphyr_parser::Marker) -> Pos {
    Pos {
        line: m.line(),
        col: m.col() + 1,
    }
}

enum Frame {
    Seq(Vec<Node>, Pos, usize),
    Map(Vec<(Node, Node)>, Option<Node>, Pos, usize),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    docs: Vec<Node>,
    anchors: HashMap<usize, Node>,
    error: Option<YamlError>,
}

impl Builder {
    fn push_node(&mut self, node: Node) {
        match self.stack.last_mut() {
            Some(Frame::Seq(items, ..)) => items.push(node),
            Some(Frame::Map(entries, key, ..)) => match key.take() {
                Some(k) => entries.push((k, node)),
                None => *key = Some(node),
            },
            None => self.docs.push(node),
        }
    }
    fn finish(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        self.push_node(node);
    }
}

impl<'a> SpannedEventReceiver<'a> for Builder {
    fn on_event(&mut self, ev: Event<'a>, span: Span) {
        if self.error.is_some() {
            return;
        }
        if self.stack.len() > MAX_DEPTH {
            self.error = Some(YamlError {
                pos: pos_of(span.start),
                message: "nesting too deep".into(),
            });
            return;
        }
        match ev {
            Event::Scalar(v, style, anchor, _) => {
                let node = Node::Scalar(Scalar {
                    value: v.into_owned(),
                    style,
                    start: pos_of(span.start),
                    end: pos_of(span.end),
                });
                self.finish(node, anchor);
            }
            Event::SequenceStart(anchor, _) => {
                self.stack
                    .push(Frame::Seq(Vec::new(), pos_of(span.start), anchor));
            }
            Event::MappingStart(anchor, _) => {
                self.stack
                    .push(Frame::Map(Vec::new(), None, pos_of(span.start), anchor));
            }
            Event::SequenceEnd => {
                if let Some(Frame::Seq(items, p, anchor)) = self.stack.pop() {
                    self.finish(Node::Seq(items, p), anchor);
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map(entries, _, p, anchor)) = self.stack.pop() {
                    self.finish(Node::Map(entries, p), anchor);
                }
            }
            Event::Alias(id) => {
                let node = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .unwrap_or(Node::Scalar(Scalar {
                        value: String::new(),
                        style: ScalarStyle::Plain,
                        start: pos_of(span.start),
                        end: pos_of(span.end),
                    }));
                self.push_node(node);
            }
            _ => {}
        }
    }
}

/// Parses the first document of `text`.
///
/// # Errors
/// The parser's message and position.
pub fn parse(text: &str) -> Result<Option<Node>, YamlError> {
    let mut b = Builder::default();
    let mut p = Parser::new_from_str(text);
    if let Err(e) = p.load(&mut b, false) {
        return Err(YamlError {
            pos: pos_of(*e.marker()),
            message: e.info().to_string(),
        });
    }
    if let Some(e) = b.error {
        return Err(e);
    }
    Ok(b.docs.into_iter().next())
}

/// The text of a scalar as a shell reads it, with the file position of every
/// character. Block literals (`|`) keep their lines; folded blocks (`>`) and
/// multi-line flow scalars are folded as YAML folds them (lines of the same
/// indentation joined by a space). Positions inside a quoted flow scalar with
/// escapes may drift by the escapes' length.
pub fn scalar_text(s: &Scalar, source_lines: &[&str]) -> (Vec<char>, Vec<Pos>) {
    let mut chars = Vec::new();
    let mut pos = Vec::new();
    match s.style {
        ScalarStyle::Literal | ScalarStyle::Folded => {
            let folded = s.style == ScalarStyle::Folded;
            let indent = s.start.col - 1;
            let last = s.end.line.max(s.start.line);
            let mut prev_plain = false;
            for line_no in s.start.line..=last {
                let Some(raw) = source_lines.get(line_no - 1) else {
                    break;
                };
                let raw: Vec<char> = raw.trim_end_matches('\r').chars().collect();
                let lead = raw.iter().take_while(|c| **c == ' ').count();
                if line_no == last && raw.iter().all(|c| c.is_whitespace()) {
                    break;
                }
                if lead < indent && raw.iter().any(|c| !c.is_whitespace()) {
                    break;
                }
                let content: Vec<char> = raw.iter().skip(indent.min(raw.len())).copied().collect();
                let blank = content.iter().all(|c| c.is_whitespace());
                let plain = !blank && content.first().is_some_and(|c| *c != ' ' && *c != '\t');
                if line_no > s.start.line {
                    let sep = if folded && prev_plain && plain {
                        ' '
                    } else {
                        '\n'
                    };
                    chars.push(sep);
                    pos.push(Pos {
                        line: line_no,
                        col: 1,
                    });
                }
                for (i, c) in content.iter().enumerate() {
                    chars.push(*c);
                    pos.push(Pos {
                        line: line_no,
                        col: indent + i + 1,
                    });
                }
                prev_plain = plain;
            }
        }
        _ => {
            let quoted = matches!(
                s.style,
                ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted
            );
            let q = usize::from(quoted);
            if s.end.line <= s.start.line {
                for (i, c) in s.value.chars().enumerate() {
                    chars.push(c);
                    pos.push(Pos {
                        line: s.start.line,
                        col: s.start.col + q + i,
                    });
                }
            } else {
                // A flow scalar over several lines: YAML folds the lines, so
                // take the source text line by line, joined by a space.
                for line_no in s.start.line..=s.end.line {
                    let Some(raw) = source_lines.get(line_no - 1) else {
                        break;
                    };
                    let raw: Vec<char> = raw.trim_end_matches('\r').chars().collect();
                    let from = if line_no == s.start.line {
                        s.start.col - 1 + q
                    } else {
                        raw.iter().take_while(|c| c.is_whitespace()).count()
                    };
                    let to = if line_no == s.end.line {
                        (s.end.col - 1).saturating_sub(q).min(raw.len())
                    } else {
                        raw.len() - raw.iter().rev().take_while(|c| c.is_whitespace()).count()
                    };
                    if line_no > s.start.line {
                        chars.push(if from >= to { '\n' } else { ' ' });
                        pos.push(Pos {
                            line: line_no,
                            col: 1,
                        });
                    }
                    for (i, c) in raw.iter().enumerate().take(to).skip(from) {
                        chars.push(*c);
                        pos.push(Pos {
                            line: line_no,
                            col: i + 1,
                        });
                    }
                }
            }
        }
    }
    (chars, pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_at(src: &str, path: &[&str]) -> (String, Vec<Pos>) {
        let root = parse(src).unwrap().unwrap();
        let mut n = &root;
        for k in path {
            n = match k.parse::<usize>() {
                Ok(i) => &n.items()[i],
                Err(_) => n.get(k).unwrap(),
            };
        }
        let lines: Vec<&str> = src.lines().collect();
        let (c, p) = scalar_text(n.as_scalar().unwrap(), &lines);
        (c.into_iter().collect(), p)
    }

    #[test]
    fn literal_block_positions() {
        let src = "steps:\n  - run: |\n      echo hi\n      docker build \\\n        --push .\n  - run: x\n";
        let (t, p) = text_at(src, &["steps", "0", "run"]);
        assert_eq!(t, "echo hi\ndocker build \\\n  --push .");
        let i = t.find("--push").unwrap();
        assert_eq!(p[i], Pos { line: 5, col: 9 });
        let d = t.find("docker").unwrap();
        assert_eq!(p[d], Pos { line: 4, col: 7 });
    }

    #[test]
    fn folded_block_joins_lines() {
        let src = "run: >-\n  docker build\n  --push .\n";
        let (t, p) = text_at(src, &["run"]);
        assert_eq!(t, "docker build --push .");
        assert_eq!(p[t.find("--push").unwrap()], Pos { line: 3, col: 3 });
    }

    #[test]
    fn plain_and_quoted_positions() {
        let src = "a: docker build -t x .\nb: \"docker build --tag y .\"\n";
        let (t, p) = text_at(src, &["a"]);
        assert_eq!(p[t.find("-t").unwrap()], Pos { line: 1, col: 17 });
        let (t, p) = text_at(src, &["b"]);
        assert_eq!(p[t.find("--tag").unwrap()], Pos { line: 2, col: 18 });
    }

    #[test]
    fn errors_have_positions() {
        let e = parse("a: [1, 2\nb: c\n").unwrap_err();
        assert!(e.pos.line >= 1, "{e:?}");
    }
}

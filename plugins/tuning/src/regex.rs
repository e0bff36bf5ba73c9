//! The allowlist's regular expressions: the part of Go's RE2 syntax an
//! allowlist line uses, matched unanchored as `regexp.MatchString` does.
//! A regex crate would cost the binary 60 KB for a file that rarely exists.
//!
//! Supported: literals and escaped punctuation, `.`, `^` and `$` (text
//! start and end, Go's default), `\A` `\z`, `\d \D \w \W \s \S`, `\t \n \r`,
//! bracket classes with ranges, negation and those escapes, groups
//! `( )`, `(?: )`, `(?P<name> )`, `(?<name> )`, alternation `|`, and the
//! repetitions `* + ? {n} {n,} {n,m}`, greedy or lazy. Anything else (flags,
//! Unicode classes, POSIX classes, `\b`) is refused with an error, never
//! silently matched differently. Matching is a backtracking search with a
//! step budget: a key is a short string.

/// A compiled expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regex {
    alts: Vec<Vec<Piece>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Char(char),
    Any,
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    Start,
    End,
    Group(Vec<Vec<Piece>>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    node: Node,
    min: u32,
    max: u32,
    greedy: bool,
}

/// Steps one match may take before it is given up (as no match).
const STEP_BUDGET: u32 = 1_000_000;
/// Go's limit on a repetition count.
const MAX_REPEAT: u32 = 1000;

const DIGIT: &[(char, char)] = &[('0', '9')];
const WORD: &[(char, char)] = &[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')];
const SPACE: &[(char, char)] = &[('\t', '\n'), ('\x0c', '\r'), (' ', ' ')];

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl Regex {
    /// Compiles `pattern`; the error says what is not understood.
    pub fn new(pattern: &str) -> Result<Regex, String> {
        let mut p = Parser {
            chars: pattern.chars().peekable(),
        };
        let alts = p.alternation()?;
        match p.chars.next() {
            None => Ok(Regex { alts }),
            Some(c) => Err(format!("unexpected {c:?}")),
        }
    }

    /// True when the expression matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        let mut steps = 0;
        (0..=t.len()).any(|start| {
            self.alts
                .iter()
                .any(|alt| seq(alt, start, &t, &mut steps, &mut |_, _| true))
        })
    }
}

impl Parser<'_> {
    fn alternation(&mut self) -> Result<Vec<Vec<Piece>>, String> {
        let mut alts = vec![self.concat()?];
        while self.chars.next_if_eq(&'|').is_some() {
            alts.push(self.concat()?);
        }
        Ok(alts)
    }

    fn concat(&mut self) -> Result<Vec<Piece>, String> {
        let mut pieces = Vec::new();
        while let Some(&c) = self.chars.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let node = self.atom()?;
            let (min, max) = self.repetition()?;
            let greedy = !(max != 1 || min != 1) || self.chars.next_if_eq(&'?').is_none();
            if matches!(node, Node::Start | Node::End) && (min, max) != (1, 1) {
                return Err("repetition of an anchor".into());
            }
            pieces.push(Piece {
                node,
                min,
                max,
                greedy,
            });
        }
        Ok(pieces)
    }

    fn repetition(&mut self) -> Result<(u32, u32), String> {
        let r = match self.chars.peek() {
            Some('*') => (0, u32::MAX),
            Some('+') => (1, u32::MAX),
            Some('?') => (0, 1),
            Some('{') => return self.counted(),
            _ => return Ok((1, 1)),
        };
        self.chars.next();
        Ok(r)
    }

    /// `{n}`, `{n,}`, `{n,m}`; a `{` that starts none of them is a literal
    /// in Go, which is not supported here.
    fn counted(&mut self) -> Result<(u32, u32), String> {
        self.chars.next();
        let mut text = String::new();
        loop {
            match self.chars.next() {
                Some('}') => break,
                Some(c) if c.is_ascii_digit() || c == ',' => text.push(c),
                _ => return Err("malformed repetition {…}".into()),
            }
        }
        let num = |s: &str| s.parse::<u32>().ok().filter(|n| *n <= MAX_REPEAT);
        let (min, max) = match text.split_once(',') {
            None => num(&text).map(|n| (n, n)),
            Some((a, "")) => num(a).map(|n| (n, u32::MAX)),
            Some((a, b)) => num(a).zip(num(b)),
        }
        .ok_or_else(|| format!("invalid repetition {{{text}}}"))?;
        if min > max {
            return Err(format!("invalid repetition {{{text}}}"));
        }
        Ok((min, max))
    }

    fn atom(&mut self) -> Result<Node, String> {
        let c = self.chars.next().ok_or("missing expression")?;
        Ok(match c {
            '.' => Node::Any,
            '^' => Node::Start,
            '$' => Node::End,
            '[' => self.class()?,
            '(' => self.group()?,
            '\\' => self.escape(false)?,
            '*' | '+' | '?' | '{' => return Err(format!("missing argument to repetition {c}")),
            c => Node::Char(c),
        })
    }

    fn group(&mut self) -> Result<Node, String> {
        if self.chars.next_if_eq(&'?').is_some() {
            match self.chars.next() {
                Some(':') => {}
                Some('P') if self.chars.next_if_eq(&'<').is_some() => self.group_name()?,
                Some('<') => self.group_name()?,
                _ => return Err("flags and other (?…) groups are not supported".into()),
            }
        }
        let alts = self.alternation()?;
        match self.chars.next() {
            Some(')') => Ok(Node::Group(alts)),
            _ => Err("missing closing )".into()),
        }
    }

    fn group_name(&mut self) -> Result<(), String> {
        loop {
            match self.chars.next() {
                Some('>') => return Ok(()),
                Some(c) if c.is_alphanumeric() || c == '_' => {}
                _ => return Err("invalid group name".into()),
            }
        }
    }

    /// After a `\`. In a class, only escapes that stand for characters.
    fn escape(&mut self, in_class: bool) -> Result<Node, String> {
        let c = self.chars.next().ok_or("trailing \\")?;
        let class = |r: &[(char, char)], negated| Node::Class {
            ranges: r.to_vec(),
            negated,
        };
        Ok(match c {
            'd' => class(DIGIT, false),
            'D' => class(DIGIT, true),
            'w' => class(WORD, false),
            'W' => class(WORD, true),
            's' => class(SPACE, false),
            'S' => class(SPACE, true),
            'A' if !in_class => Node::Start,
            'z' if !in_class => Node::End,
            't' => Node::Char('\t'),
            'n' => Node::Char('\n'),
            'r' => Node::Char('\r'),
            'f' => Node::Char('\x0c'),
            'v' => Node::Char('\x0b'),
            c if c.is_ascii_punctuation() => Node::Char(c),
            c => return Err(format!("escape \\{c} is not supported")),
        })
    }

    fn class(&mut self) -> Result<Node, String> {
        let negated = self.chars.next_if_eq(&'^').is_some();
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let c = self.chars.next().ok_or("missing closing ]")?;
            if c == ']' && !first {
                break;
            }
            first = false;
            if c == '[' && self.chars.peek() == Some(&':') {
                return Err("POSIX classes [:…:] are not supported".into());
            }
            let lo = match c {
                '\\' => match self.escape(true)? {
                    Node::Char(ch) => ch,
                    Node::Class {
                        ranges: r,
                        negated: false,
                    } => {
                        ranges.extend(r);
                        continue;
                    }
                    _ => return Err("negated escapes in a class are not supported".into()),
                },
                c => c,
            };
            let is_range = self.chars.peek() == Some(&'-') && {
                let mut ahead = self.chars.clone();
                ahead.next();
                ahead.peek().is_some_and(|n| *n != ']')
            };
            if !is_range {
                ranges.push((lo, lo));
                continue;
            }
            self.chars.next();
            let hi = match self.chars.next().ok_or("missing closing ]")? {
                '\\' => match self.escape(true)? {
                    Node::Char(ch) => ch,
                    _ => return Err("invalid class range".into()),
                },
                c => c,
            };
            if hi < lo {
                return Err(format!("invalid class range {lo}-{hi}"));
            }
            ranges.push((lo, hi));
        }
        Ok(Node::Class { ranges, negated })
    }
}

type Cont<'k> = dyn FnMut(usize, &mut u32) -> bool + 'k;

fn seq(pieces: &[Piece], pos: usize, t: &[char], steps: &mut u32, k: &mut Cont<'_>) -> bool {
    match pieces.split_first() {
        None => k(pos, steps),
        Some((first, rest)) => repeat(first, 0, pos, t, steps, &mut |q, s| seq(rest, q, t, s, k)),
    }
}

fn repeat(
    p: &Piece,
    count: u32,
    pos: usize,
    t: &[char],
    steps: &mut u32,
    k: &mut Cont<'_>,
) -> bool {
    *steps += 1;
    if *steps > STEP_BUDGET {
        return false;
    }
    let more = |steps: &mut u32, k: &mut Cont<'_>| {
        count < p.max
            && node(&p.node, pos, t, steps, &mut |q, s| {
                // An empty iteration past the minimum cannot lead anywhere new.
                (q != pos || count < p.min) && repeat(p, count + 1, q, t, s, k)
            })
    };
    if count < p.min {
        return more(steps, k);
    }
    // Greedy: one more first, then stop; lazy: the other way round.
    let (first_more, mut found) = (p.greedy, false);
    for try_more in [first_more, !first_more] {
        found = if try_more {
            more(steps, k)
        } else {
            k(pos, steps)
        };
        if found {
            break;
        }
    }
    found
}

fn node(n: &Node, pos: usize, t: &[char], steps: &mut u32, k: &mut Cont<'_>) -> bool {
    match n {
        Node::Char(c) => t.get(pos) == Some(c) && k(pos + 1, steps),
        Node::Any => t.get(pos).is_some_and(|c| *c != '\n') && k(pos + 1, steps),
        Node::Class { ranges, negated } => {
            t.get(pos)
                .is_some_and(|c| ranges.iter().any(|(lo, hi)| (lo..=hi).contains(&c)) != *negated)
                && k(pos + 1, steps)
        }
        Node::Start => pos == 0 && k(pos, steps),
        Node::End => pos == t.len() && k(pos, steps),
        Node::Group(alts) => alts.iter().any(|alt| seq(alt, pos, t, steps, k)),
    }
}

#[cfg(test)]
mod tests {
    use super::Regex;

    fn m(re: &str, text: &str) -> bool {
        Regex::new(re).unwrap().is_match(text)
    }

    #[test]
    fn matches_as_go_does() {
        for (re, text, want) in [
            (
                "^net\\.ipv4\\.conf\\.IFNAME\\.arp_ignore$",
                "net.ipv4.conf.IFNAME.arp_ignore",
                true,
            ),
            (
                "^net\\.ipv4\\.conf\\.IFNAME\\.arp_ignore$",
                "net.ipv4.conf.IFNAME.arp_ignorex",
                false,
            ),
            (
                "^net\\.ipv6\\.conf\\.IFNAME\\.[a-z_]*$",
                "net.ipv6.conf.IFNAME.accept_ra",
                true,
            ),
            (
                "^net\\.ipv6\\.conf\\.IFNAME\\.[a-z_]*$",
                "net.ipv6.conf.IFNAME.accept_ra2",
                false,
            ),
            ("rp_filter", "net.ipv4.conf.all.rp_filter", true),
            ("net.core", "netXcore", true),
            ("^net\\.core\\..+", "net.core.", false),
            ("^(net|kernel)\\.x$", "kernel.x", true),
            ("^(?:a|b)+$", "abba", true),
            ("^(?P<x>a)c$", "ac", true),
            ("^a{2,3}$", "aaaa", false),
            ("^a{2,3}$", "aaa", true),
            ("^a{2}$", "aa", true),
            ("^a{2,}b", "aaaab", true),
            ("^[^.]+$", "net.x", false),
            ("^[^.]+$", "netx", true),
            ("\\d+", "abc9", true),
            ("^\\w+$", "a_1", true),
            ("^\\w+$", "a-1", false),
            ("^[\\w.]+$", "a.b", true),
            ("^[a\\-z]$", "-", true),
            ("^[a-]$", "-", true),
            ("^[]a]$", "]", true),
            ("x*", "", true),
            ("^$", "", true),
            ("^a.*?b$", "axxb", true),
            ("(a*)*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaac", false),
            ("\\Anet\\z", "net", true),
            ("", "anything", true),
        ] {
            assert_eq!(m(re, text), want, "{re} on {text}");
        }
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        for bad in [
            "(",
            ")",
            "[a",
            "a{2",
            "a{3,2}",
            "*a",
            "(?i)net",
            "\\p{L}",
            "[[:alpha:]]",
            "\\b",
            "a{1001}",
            "^*",
            "\\",
        ] {
            assert!(Regex::new(bad).is_err(), "{bad}");
        }
    }
}

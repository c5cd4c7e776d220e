//! Groups a stage's graph by the array operations of the source program (issue 9: "the Delta DAG of
//! an array program stays readable"). With arrays of dual numbers (the array paper §4.1) a `map2` of
//! length n makes n products, a `sum` n additions, and so on; each node that carries a source span
//! joins the innermost array operation whose call contains that span, so the drawing can tint them
//! alike and name the operation in a legend (`map2 @ 2:21`).

use cotangent::diag::{line_col, Span};
use cotangent::interp::{Graph, GraphGroup};
use cotangent::ir::{children, Expr, ExprKind, Prim, Program};

/// One array operation's call in the source: its span and the group name its nodes get.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayCall {
    pub span: Span,
    pub name: String,
}

/// The array operations that make nodes of their own (indexing and `length` only select or count),
/// every call with its span, over every definition (explicit stack: see limits.rs).
pub fn array_calls(program: &Program, text: &str) -> Vec<ArrayCall> {
    let mut out = vec![];
    let mut stack: Vec<&Expr> = program.defs.iter().map(|d| &d.body).collect();
    while let Some(e) = stack.pop() {
        if let ExprKind::Prim(p, _) = &e.kind {
            if p.is_array_op() && !matches!(p, Prim::Index | Prim::Length) && !e.span.is_none() {
                let lc = line_col(text, e.span.start as usize);
                out.push(ArrayCall { span: e.span, name: format!("{} @ {}:{}", p.symbol(), lc.line, lc.col) });
            }
        }
        stack.extend(children(e));
    }
    out
}

fn contains(outer: Span, inner: Span) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// Puts every node not already in a group (a parallel run's job) and whose span lies inside an array
/// call into the innermost such call's group, and lists the groups used, in order of first use.
pub fn group_by_array_call(graph: &mut Graph, calls: &[ArrayCall]) {
    if calls.is_empty() {
        return;
    }
    let mut used: Vec<usize> = vec![];
    for n in graph.nodes.iter_mut().filter(|n| n.group.is_none()) {
        let Some(sp) = n.span.filter(|s| !s.is_none()) else { continue };
        let inner = calls
            .iter()
            .enumerate()
            .filter(|(_, c)| contains(c.span, sp))
            .min_by_key(|(_, c)| c.span.end - c.span.start)
            .map(|(i, _)| i);
        if let Some(i) = inner {
            n.group = Some(calls[i].name.clone());
            if !used.contains(&i) {
                used.push(i);
            }
        }
    }
    for i in used {
        let c = &calls[i];
        graph.groups.push(GraphGroup { name: c.name.clone(), label: c.name.clone(), after: vec![] });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotangent::interp::GraphNode;

    #[test]
    fn finds_array_calls_with_their_places() {
        let text = "def main (a, b) = sum (map2 (\\x y -> x * y) a b) + a ! 0\n";
        let p = cotangent::syntax::parse_program(text).unwrap();
        let mut names: Vec<String> = array_calls(&p, text).into_iter().map(|c| c.name).collect();
        names.sort();
        assert_eq!(names, ["map2 @ 1:23", "sum @ 1:19"]);
    }

    #[test]
    fn a_node_joins_the_innermost_call_around_it() {
        let calls = vec![ArrayCall { span: Span::new(0, 50), name: "fold".into() }, ArrayCall { span: Span::new(10, 20), name: "map".into() }];
        let node = |id, span: Option<Span>, group: Option<&str>| GraphNode { id, span, group: group.map(String::from), ..GraphNode::default() };
        let mut g = Graph {
            nodes: vec![
                node(1, Some(Span::new(12, 14)), None),
                node(2, Some(Span::new(30, 31)), None),
                node(3, Some(Span::new(60, 61)), None),
                node(4, None, None),
                node(5, Some(Span::new(12, 14)), Some("job 1")),
            ],
            ..Graph::default()
        };
        group_by_array_call(&mut g, &calls);
        let groups: Vec<Option<&str>> = g.nodes.iter().map(|n| n.group.as_deref()).collect();
        assert_eq!(groups, [Some("map"), Some("fold"), None, None, Some("job 1")]);
        assert_eq!(g.groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), ["map", "fold"]);
    }
}

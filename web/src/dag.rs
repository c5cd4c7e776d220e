//! Draws a stage's graph (the Delta DAG, backpropagators, Contribs) as SVG. The layout (ranks,
//! crossing reduction, placement, edge routes) comes from the `layout-rs` crate; the drawing is ours,
//! so that every node is an element the page can find: `<g class="node" id="dag-n{id}" data-node="{id}">`.
//! Graphs larger than the drawing limit are cut to their first nodes, and the SVG says how many were left out.
//! Nodes in a group (a parallel run's job, or the array operation that made them: `arraygroups`) share
//! a tint, sit side by side in their rank, and the SVG's legend names each group.

use layout::core::base::Orientation;
use layout::core::format::{ClipHandle, RenderBackend};
use layout::core::geometry::Point;
use layout::core::style::StyleAttr;
use layout::std_shapes::shapes::{Arrow, Element, ShapeKind};
use layout::topo::layout::VisualGraph;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// Default number of nodes drawn; the rest are counted in the caption.
pub const DRAW_LIMIT: usize = 300;

/// Groups named in the legend; the rest are counted.
const LEGEND_LIMIT: usize = 8;
/// Tints for groups (`grp-0` … `grp-5` in style.css).
const GROUP_TINTS: usize = 6;

/// Nodes plus long-edge dummies up to which layout-rs lays the graph out (see `draw`).
pub const LAYOUT_RS_LIMIT: usize = 30;

/// The page's view of `cotangent::interp::Graph` (the core's type is Serialize only; the page sends
/// a graph back to be drawn when another stage is selected).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct G {
    #[serde(default)]
    pub nodes: Vec<N>,
    #[serde(default)]
    pub edges: Vec<E>,
    #[serde(default)]
    pub omitted: u64,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct N {
    pub id: u64,
    #[serde(default)]
    pub ctor: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub delta_id: Option<i64>,
    #[serde(default)]
    pub value: Option<f64>,
    #[serde(default)]
    pub shared: bool,
    #[serde(default)]
    pub visits: Option<u64>,
    #[serde(default)]
    pub group: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct E {
    pub from: u64,
    pub to: u64,
    #[serde(default)]
    pub label: String,
}

impl From<&cotangent::interp::Graph> for G {
    fn from(g: &cotangent::interp::Graph) -> G {
        G {
            nodes: g
                .nodes
                .iter()
                .map(|n| N {
                    id: n.id,
                    ctor: n.ctor.clone(),
                    label: n.label.clone(),
                    delta_id: n.delta_id,
                    // drawn as a number where the value is one real (a value that is not is in the label)
                    value: n.value.as_ref().and_then(|v| v.num),
                    shared: n.shared,
                    visits: n.visits,
                    group: n.group.clone(),
                })
                .collect(),
            edges: g.edges.iter().map(|e| E { from: e.from, to: e.to, label: e.label.clone() }).collect(),
            omitted: g.omitted,
        }
    }
}

pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A short rendering of a real for labels.
pub fn num(r: f64) -> String {
    if r.is_nan() {
        "nan".into()
    } else if r.is_infinite() {
        (if r > 0.0 { "inf" } else { "-inf" }).into()
    } else if r == r.trunc() && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else if r.abs() >= 1e-3 && r.abs() < 1e6 {
        let s = format!("{r:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{r:.3e}")
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// Records where layout-rs would draw: node boxes (tagged with our id through `properties`) and edge paths.
#[derive(Default)]
struct Collect {
    boxes: HashMap<u64, (Point, Point)>,
    paths: Vec<(String, Vec<(Point, Point)>)>,
}

impl RenderBackend for Collect {
    fn draw_rect(&mut self, xy: Point, size: Point, _look: &StyleAttr, properties: Option<String>, _clip: Option<ClipHandle>) {
        if let Some(id) = properties.and_then(|p| p.parse::<u64>().ok()) {
            self.boxes.insert(id, (xy, size));
        }
    }
    fn draw_line(&mut self, _: Point, _: Point, _: &StyleAttr, _: Option<String>) {}
    fn draw_circle(&mut self, _: Point, _: Point, _: &StyleAttr, _: Option<String>) {}
    fn draw_text(&mut self, _: Point, _: &str, _: &StyleAttr) {}
    fn draw_arrow(&mut self, path: &[(Point, Point)], _: bool, _: (bool, bool), _: &StyleAttr, properties: Option<String>, _: &str) {
        self.paths.push((properties.unwrap_or_default(), path.to_vec()));
    }
    fn create_clip(&mut self, _: Point, _: Point, _: usize) -> ClipHandle {
        0
    }
}


/// Longest-path ranks from the sources (edges point down); cycles are broken by ignoring back edges.
fn rank(order: &[u64], pairs: &[(u64, u64)]) -> HashMap<u64, usize> {
    let idx: HashMap<u64, usize> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let n = order.len();
    let mut succ = vec![vec![]; n];
    let mut indeg = vec![0usize; n];
    for (a, b) in pairs {
        succ[idx[a]].push(idx[b]);
        indeg[idx[b]] += 1;
    }
    let mut r = vec![0usize; n];
    let mut queue: std::collections::VecDeque<usize> = (0..n).filter(|i| indeg[*i] == 0).collect();
    let mut queued = vec![false; n];
    for &i in &queue {
        queued[i] = true;
    }
    loop {
        while let Some(i) = queue.pop_front() {
            for &j in &succ[i] {
                if queued[j] {
                    continue; // a back edge of a cycle
                }
                r[j] = r[j].max(r[i] + 1);
                indeg[j] = indeg[j].saturating_sub(1);
                if indeg[j] == 0 {
                    queued[j] = true;
                    queue.push_back(j);
                }
            }
        }
        // A cycle: release its first node not yet placed.
        match (0..n).find(|i| !queued[*i]) {
            Some(i) => {
                queued[i] = true;
                queue.push_back(i);
            }
            None => break,
        }
    }
    order.iter().enumerate().map(|(i, id)| (*id, r[i])).collect()
}

fn layout_rs(order: &[u64], sizes: &HashMap<u64, Point>, pairs: &[(u64, u64)]) -> Collect {
    let mut vg = VisualGraph::new(Orientation::TopToBottom);
    let mut handles = HashMap::new();
    for id in order {
        let el = Element::create_with_properties(ShapeKind::new_box(""), StyleAttr::simple(), Orientation::TopToBottom, sizes[id], id.to_string());
        handles.insert(*id, vg.add_node(el));
    }
    for (a, b) in pairs {
        let mut arrow = Arrow::simple("");
        arrow.properties = Some(format!("{a} {b}"));
        vg.add_edge(arrow, handles[a], handles[b]);
    }
    let mut c = Collect::default();
    vg.do_it(false, false, false, &mut c);
    c
}

/// A linear-time layered layout for big graphs: longest-path ranks, a few barycentre sweeps to order
/// each rank, nodes packed left to right, edges as curves between their ends.
fn layered(order: &[u64], sizes: &HashMap<u64, Point>, pairs: &[(u64, u64)], ranks: &HashMap<u64, usize>, group_of: &HashMap<u64, usize>) -> Collect {
    const GAP_X: f64 = 18.0;
    const GAP_Y: f64 = 46.0;
    let depth = ranks.values().copied().max().unwrap_or(0) + 1;
    let mut rows: Vec<Vec<u64>> = vec![vec![]; depth];
    for id in order {
        rows[ranks[id]].push(*id);
    }
    let mut preds: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut succs: HashMap<u64, Vec<u64>> = HashMap::new();
    for (a, b) in pairs {
        succs.entry(*a).or_default().push(*b);
        preds.entry(*b).or_default().push(*a);
    }
    let mut pos: HashMap<u64, f64> = HashMap::new();
    let reindex = |rows: &Vec<Vec<u64>>, pos: &mut HashMap<u64, f64>| {
        for row in rows {
            for (i, id) in row.iter().enumerate() {
                pos.insert(*id, i as f64);
            }
        }
    };
    reindex(&rows, &mut pos);
    for sweep in 0..4 {
        let down = sweep % 2 == 0;
        let range: Vec<usize> = if down { (1..depth).collect() } else { (0..depth.saturating_sub(1)).rev().collect() };
        for r in range {
            let nb = if down { &preds } else { &succs };
            let mut keyed: Vec<(f64, u64)> = rows[r]
                .iter()
                .map(|id| {
                    let ns = nb.get(id).map(|v| v.as_slice()).unwrap_or(&[]);
                    let k = if ns.is_empty() { pos[id] } else { ns.iter().map(|n| pos[n]).sum::<f64>() / ns.len() as f64 };
                    (k, *id)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
            rows[r] = keyed.into_iter().map(|(_, id)| id).collect();
            for (i, id) in rows[r].iter().enumerate() {
                pos.insert(*id, i as f64);
            }
        }
    }
    // A group's nodes side by side in each rank (stable: the barycentre order within a group stays).
    if !group_of.is_empty() {
        for row in &mut rows {
            row.sort_by_key(|id| group_of.get(id).copied().unwrap_or(usize::MAX));
        }
    }
    let widths: Vec<f64> = rows.iter().map(|row| row.iter().map(|id| sizes[id].x + GAP_X).sum::<f64>()).collect();
    let max_w = widths.iter().copied().fold(0.0, f64::max);
    let mut c = Collect::default();
    let mut y = 0.0;
    for (r, row) in rows.iter().enumerate() {
        let h = row.iter().map(|id| sizes[id].y).fold(0.0, f64::max);
        let mut x = (max_w - widths[r]) / 2.0;
        for id in row {
            let sz = sizes[id];
            c.boxes.insert(*id, (Point::new(x, y + (h - sz.y) / 2.0), sz));
            x += sz.x + GAP_X;
        }
        y += h + GAP_Y;
    }
    for (a, b) in pairs {
        let (pa, sa) = c.boxes[a];
        let (pb, sb) = c.boxes[b];
        let start = Point::new(pa.x + sa.x / 2.0, pa.y + sa.y);
        let end = Point::new(pb.x + sb.x / 2.0, pb.y);
        let (start, end) = if end.y > start.y { (start, end) } else { (Point::new(pa.x + sa.x / 2.0, pa.y), Point::new(pb.x + sb.x / 2.0, pb.y + sb.y)) };
        let dy = (end.y - start.y) / 2.0;
        c.paths.push((format!("{a} {b}"), vec![(start, Point::new(start.x, start.y + dy)), (Point::new(end.x, end.y - dy), end)]));
    }
    c
}

const CHAR_W: f64 = 7.2;
const LINE_H: f64 = 15.0;

/// Shortens long decimal numbers inside a label (`45.980000000000004` → `45.98`).
pub fn tidy_numbers(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    let mut tok = String::new();
    let flush = |tok: &mut String, out: &mut String| {
        if tok.len() > 8 && tok.contains('.') {
            if let Ok(r) = tok.parse::<f64>() {
                out.push_str(&num(r));
                tok.clear();
                return;
            }
        }
        out.push_str(tok);
        tok.clear();
    };
    for c in label.chars() {
        if c.is_ascii_digit() || c == '.' || ((c == 'e' || c == '-') && !tok.is_empty()) {
            tok.push(c);
        } else {
            flush(&mut tok, &mut out);
            out.push(c);
        }
    }
    flush(&mut tok, &mut out);
    out
}

fn node_lines(n: &N) -> (String, String) {
    let top = tidy_numbers(if n.label.is_empty() { &n.ctor } else { &n.label });
    let mut sub = vec![];
    if let Some(d) = n.delta_id {
        sub.push(format!("#{d}"));
    }
    if let Some(v) = n.value {
        sub.push(num(v));
    }
    if let Some(k) = n.visits {
        if k > 1 {
            sub.push(format!("×{k}"));
        }
    }
    (clip(&top, 28), clip(&sub.join("  "), 28))
}

/// The SVG of a graph, at most `limit` nodes; `None` for an empty graph.
pub fn draw(g: &G, limit: usize) -> Option<String> {
    if g.nodes.is_empty() {
        return None;
    }
    let limit = limit.max(1);
    // Over the limit: the first half and the last half of the nodes (the core lists them from the
    // output down, inputs last), so both ends of a long chain show, and with them every stage of an
    // array program's pipeline (a dot product's products first, its sum's additions last).
    let head = if g.nodes.len() > limit { limit.div_ceil(2) } else { limit };
    let tail = (limit - head.min(limit)).min(g.nodes.len().saturating_sub(head));
    let drawn: Vec<&N> = g.nodes.iter().take(head).chain(g.nodes[g.nodes.len() - tail..].iter()).collect();
    let omitted = g.omitted + (g.nodes.len() - drawn.len()) as u64;
    let ids: HashSet<u64> = drawn.iter().map(|n| n.id).collect();

    let mut sizes: HashMap<u64, Point> = HashMap::new();
    let mut order = vec![];
    for n in &drawn {
        if sizes.contains_key(&n.id) {
            continue;
        }
        let (top, sub) = node_lines(n);
        let w = (top.chars().count().max(sub.chars().count()) as f64 * CHAR_W + 18.0).max(34.0);
        let h = if sub.is_empty() { LINE_H + 12.0 } else { 2.0 * LINE_H + 10.0 };
        sizes.insert(n.id, Point::new(w, h));
        order.push(n.id);
    }
    let mut edges = vec![];
    let mut seen = HashSet::new();
    for e in &g.edges {
        if e.from == e.to || !ids.contains(&e.from) || !ids.contains(&e.to) || !seen.insert((e.from, e.to)) {
            continue;
        }
        edges.push(e);
    }
    let pairs: Vec<(u64, u64)> = edges.iter().map(|e| (e.from, e.to)).collect();
    let ranks = rank(&order, &pairs);
    // layout-rs gives the nicer drawing (crossing reduction, routed long edges), but its time grows fast
    // with the nodes plus the dummy nodes of long edges: 1 ms at 10, 120 ms at 40, 2 s at 80 (measured,
    // native). Past LAYOUT_RS_LIMIT we use a linear-time layered layout instead, so a graph never hangs.
    let dummies: usize = pairs.iter().map(|(a, b)| (ranks[b].abs_diff(ranks[a])).saturating_sub(1)).sum();
    // Groups (the jobs of a parallel run, the array operations) in order of first appearance.
    let mut groups: Vec<&str> = vec![];
    for n in &g.nodes {
        if let Some(g) = n.group.as_deref() {
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
    }
    let group_of: HashMap<u64, usize> =
        drawn.iter().filter_map(|n| n.group.as_deref().and_then(|g| groups.iter().position(|x| *x == g)).map(|i| (n.id, i))).collect();
    let c = if order.len() + dummies <= LAYOUT_RS_LIMIT { layout_rs(&order, &sizes, &pairs) } else { layered(&order, &sizes, &pairs, &ranks, &group_of) };

    // Bounds.
    let (mut x0, mut y0, mut x1, mut y1) = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
    let mut grow = |p: Point| {
        x0 = x0.min(p.x);
        y0 = y0.min(p.y);
        x1 = x1.max(p.x);
        y1 = y1.max(p.y);
    };
    for (xy, sz) in c.boxes.values() {
        grow(*xy);
        grow(xy.add(*sz));
    }
    for (_, path) in &c.paths {
        for (a, b) in path {
            grow(*a);
            grow(*b);
        }
    }
    let pad = 12.0;
    // Above the drawing: how many nodes were left out, then one legend line per group.
    let legend: Vec<&str> = groups.iter().take(LEGEND_LIMIT).copied().collect();
    let legend_more = groups.len() - legend.len();
    let caption_lines = usize::from(omitted > 0) + legend.len() + usize::from(legend_more > 0);
    let caption_h = if caption_lines > 0 { 18.0 * caption_lines as f64 + 6.0 } else { 0.0 };
    let caption_w = groups.iter().take(LEGEND_LIMIT).map(|g| g.chars().count()).max().unwrap_or(0) as f64 * CHAR_W + 40.0;
    let caption_w = caption_w.max(if omitted > 0 { 420.0 } else { 0.0 });
    let (w, h) = ((x1 - x0).max(caption_w) + 2.0 * pad, y1 - y0 + 2.0 * pad + caption_h);
    let (dx, dy) = (pad - x0, pad - y0 + caption_h);

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="dag" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" data-nodes="{}" data-omitted="{omitted}">"#,
        drawn.len()
    );
    s.push_str(r#"<defs><marker id="dag-arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto" markerUnits="userSpaceOnUse"><path d="M0,0 L8,4 L0,8 z" class="dag-arrowhead"/></marker></defs>"#);
    let g_nodes_in = |name: &str| g.nodes.iter().filter(|n| n.group.as_deref() == Some(name)).count();
    let mut line_y = 16.0;
    if omitted > 0 {
        let _ = write!(
            s,
            r#"<text class="dag-omitted" x="{pad}" y="{line_y}">{omitted} nodes not drawn (showing {}).</text>"#,
            if tail > 0 { format!("the first {} and the last {tail}", drawn.len() - tail) } else { format!("the first {}", drawn.len()) }
        );
        line_y += 18.0;
    }
    for (i, g) in legend.iter().enumerate() {
        let count = drawn.iter().filter(|n| n.group.as_deref() == Some(*g)).count();
        let all = g_nodes_in(g);
        let count = if count == all { format!("{count} nodes") } else { format!("{count} of {all} nodes drawn") };
        let _ = write!(
            s,
            r#"<g class="dag-group-key" data-group="{}"><rect class="swatch grp-{}" x="{pad}" y="{:.1}" width="14" height="11" rx="3"/><text class="dag-legend-text" x="{:.1}" y="{line_y:.1}">{} ({count})</text></g>"#,
            esc(g),
            i % GROUP_TINTS,
            line_y - 10.0,
            pad + 20.0,
            esc(&clip(g, 60))
        );
        line_y += 18.0;
    }
    if legend_more > 0 {
        let _ = write!(s, r#"<text class="dag-legend-text" x="{pad}" y="{line_y:.1}">… and {legend_more} more groups</text>"#);
    }
    let _ = write!(s, r#"<g transform="translate({dx:.1},{dy:.1})">"#);
    s.push_str(r#"<g class="edges">"#);
    for (props, path) in &c.paths {
        if path.len() < 2 {
            continue;
        }
        let mut d = format!(
            "M{:.1} {:.1} C{:.1} {:.1},{:.1} {:.1},{:.1} {:.1}",
            path[0].0.x, path[0].0.y, path[0].1.x, path[0].1.y, path[1].0.x, path[1].0.y, path[1].1.x, path[1].1.y
        );
        for p in path.iter().skip(2) {
            let _ = write!(d, " S{:.1} {:.1},{:.1} {:.1}", p.0.x, p.0.y, p.1.x, p.1.y);
        }
        let mut it = props.split(' ');
        let (from, to) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
        let label = edges.iter().find(|e| e.from.to_string() == from && e.to.to_string() == to).map(|e| e.label.as_str()).unwrap_or("");
        let _ = write!(s, r#"<path class="edge" d="{d}" data-from="{from}" data-to="{to}" marker-end="url(#dag-arrow)">"#);
        if !label.is_empty() {
            let _ = write!(s, "<title>{}</title>", esc(label));
        }
        s.push_str("</path>");
    }
    s.push_str("</g><g class=\"nodes\">");
    for n in &drawn {
        let Some((xy, sz)) = c.boxes.get(&n.id) else { continue };
        let (top, sub) = node_lines(n);
        let ctor_class: String = n.ctor.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        let _ = write!(
            s,
            r#"<g class="node ctor-{}{}{}" id="dag-n{}" data-node="{}" data-ctor="{}" data-label="{}""#,
            ctor_class.to_ascii_lowercase(),
            if n.shared { " shared" } else { "" },
            group_of.get(&n.id).map(|i| format!(" grp grp-{}", i % GROUP_TINTS)).unwrap_or_default(),
            n.id,
            n.id,
            esc(&n.ctor),
            esc(&n.label)
        );
        if let Some(d) = n.delta_id {
            let _ = write!(s, r#" data-delta-id="{d}""#);
        }
        if let Some(v) = n.value {
            let _ = write!(s, r#" data-value="{}""#, esc(&num(v)));
        }
        if let Some(k) = n.visits {
            let _ = write!(s, r#" data-visits="{k}""#);
        }
        if let Some(gr) = &n.group {
            let _ = write!(s, r#" data-group="{}""#, esc(gr));
        }
        s.push('>');
        let _ = write!(s, r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="6"/>"#, xy.x, xy.y, sz.x, sz.y);
        if n.shared {
            let _ = write!(s, r#"<circle class="shared-mark" cx="{:.1}" cy="{:.1}" r="4"/>"#, xy.x + sz.x - 1.0, xy.y + 1.0);
        }
        let cx = xy.x + sz.x / 2.0;
        if sub.is_empty() {
            let _ = write!(s, r#"<text x="{cx:.1}" y="{:.1}" class="lbl">{}</text>"#, xy.y + sz.y / 2.0 + 4.5, esc(&top));
        } else {
            let _ = write!(s, r#"<text x="{cx:.1}" y="{:.1}" class="lbl">{}</text>"#, xy.y + 5.0 + LINE_H - 2.0, esc(&top));
            let _ = write!(s, r#"<text x="{cx:.1}" y="{:.1}" class="sub">{}</text>"#, xy.y + 5.0 + 2.0 * LINE_H - 3.0, esc(&sub));
        }
        s.push_str("</g>");
    }
    s.push_str("</g></g></svg>");
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diamond() -> G {
        let n = |id, ctor: &str, shared| N { id, ctor: ctor.into(), label: ctor.into(), value: Some(1.5), shared, ..N::default() };
        G {
            nodes: vec![n(1, "Add", false), n(2, "Scale", false), n(3, "Scale", false), n(4, "Var", true)],
            edges: vec![
                E { from: 1, to: 2, label: String::new() },
                E { from: 1, to: 3, label: String::new() },
                E { from: 2, to: 4, label: String::new() },
                E { from: 3, to: 4, label: "<b>".into() },
            ],
            omitted: 0,
        }
    }

    #[test]
    fn draws_every_node_with_its_id() {
        let svg = draw(&diamond(), DRAW_LIMIT).unwrap();
        for id in 1..=4 {
            assert!(svg.contains(&format!("id=\"dag-n{id}\"")), "{svg}");
        }
        assert!(svg.contains("class=\"node ctor-var shared\""));
        assert_eq!(svg.matches("class=\"edge\"").count(), 4);
        assert!(svg.contains("&lt;b&gt;") && !svg.contains("<b>"));
    }

    #[test]
    fn large_graphs_are_cut() {
        let nodes = (0..2000).map(|i| N { id: i, ctor: "Add".into(), label: format!("n{i}"), ..N::default() }).collect();
        let edges = (1..2000).map(|i| E { from: i / 2, to: i, label: String::new() }).collect();
        let svg = draw(&G { nodes, edges, omitted: 5 }, 100).unwrap();
        assert!(svg.contains("1905 nodes not drawn"), "{}", &svg[..400]);
        assert_eq!(svg.matches("class=\"node ").count(), 100);
    }

    #[test]
    fn cycles_and_self_loops_do_not_panic() {
        let n = |id| N { id, ctor: "Add".into(), ..N::default() };
        let e = |from, to| E { from, to, label: String::new() };
        let g = G { nodes: vec![n(1), n(2), n(3)], edges: vec![e(1, 2), e(2, 3), e(3, 1), e(2, 2), e(1, 2)], omitted: 0 };
        assert!(draw(&g, DRAW_LIMIT).unwrap().contains("dag-n3"));
        // The same past the layout-rs limit.
        let nodes = (0..100).map(n).collect();
        let edges = (0..100).map(|i| e(i, (i + 1) % 100)).collect();
        assert!(draw(&G { nodes, edges, omitted: 0 }, DRAW_LIMIT).unwrap().contains("dag-n99"));
    }

    #[test]
    fn long_numbers_in_labels_are_shortened() {
        assert_eq!(tidy_numbers("Scale 45.980000000000004"), "Scale 45.98");
        assert_eq!(tidy_numbers("Var x1 #12 2.5"), "Var x1 #12 2.5");
        assert_eq!(tidy_numbers("Scale -0.30000000000000004 x"), "Scale -0.3 x");
    }

    #[test]
    fn hostile_labels_are_escaped() {
        let g = G { nodes: vec![N { id: 7, ctor: "<script>".into(), label: "\"x\" & <img>".into(), ..N::default() }], ..G::default() };
        let svg = draw(&g, 10).unwrap();
        assert!(!svg.contains("<script>") && !svg.contains("<img>"));
    }
}

#[cfg(test)]
mod bench {
    use super::*;
    #[test]
    #[ignore]
    fn time_draw_limit() {
        // A doubling-chain-like DAG: each node points to the previous one twice (shared), plus leaves.
        for n in [10usize, 20, 30, 40, 60, 80, 300, 3000] {
            let nodes = (0..n as u64).map(|i| N { id: i, ctor: "Add".into(), label: format!("Add #{i}"), shared: true, ..N::default() }).collect();
            let mut edges = vec![];
            for i in 1..n as u64 {
                edges.push(E { from: i, to: i - 1, label: String::new() });
                if i >= 2 { edges.push(E { from: i, to: i / 2, label: String::new() }); }
            }
            let g = G { nodes, edges, omitted: 0 };
            let t = std::time::Instant::now();
            let svg = draw(&g, DRAW_LIMIT).unwrap();
            eprintln!("{n} nodes: {:?}, {} bytes", t.elapsed(), svg.len());
        }
    }
}

//! cli::table: column alignment exactly like Go's `text/tabwriter` (as kubectl uses it), so
//! tables and `describe` output line up the way kubectl users know.
//!
//! Input is text whose cells are terminated by `\t`; the last cell of a line is not part of a
//! column. A column block is a run of consecutive lines that all have a tab-terminated cell in
//! that column; its width is the widest cell plus `padding`, at least `minwidth`.

/// kubectl's table printer: `tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)`.
pub fn kubectl_table(text: &str) -> String {
    tabwrite(text, 6, 3)
}

/// kubectl's describe printer: `tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)`.
pub fn kubectl_describe(text: &str) -> String {
    tabwrite(text, 0, 2)
}

/// Aligns the `\t`-separated cells of `text`, padding with spaces.
pub fn tabwrite(text: &str, minwidth: usize, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text
        .split_terminator('\n')
        .map(|l| l.split('\t').collect())
        .collect();
    let w = Writer {
        lines,
        minwidth,
        padding,
    };
    let mut out = String::with_capacity(text.len() * 2);
    let mut widths = Vec::new();
    w.format(&mut widths, 0, w.lines.len(), &mut out);
    out
}

struct Writer<'a> {
    lines: Vec<Vec<&'a str>>,
    minwidth: usize,
    padding: usize,
}

fn width(cell: &str) -> usize {
    cell.chars().count()
}

impl Writer<'_> {
    /// Whether line `i` has a tab-terminated cell in `column`.
    fn has_cell(&self, i: usize, column: usize) -> bool {
        column + 1 < self.lines[i].len()
    }

    fn format(&self, widths: &mut Vec<usize>, mut line0: usize, line1: usize, out: &mut String) {
        let column = widths.len();
        let mut this = line0;
        while this < line1 {
            if !self.has_cell(this, column) {
                this += 1;
                continue;
            }
            self.write_lines(widths, line0, this, out);
            line0 = this;
            let mut w = self.minwidth;
            while this < line1 && self.has_cell(this, column) {
                w = w.max(width(self.lines[this][column]) + self.padding);
                this += 1;
            }
            widths.push(w);
            self.format(widths, line0, this, out);
            widths.pop();
            line0 = this;
        }
        self.write_lines(widths, line0, line1, out);
    }

    fn write_lines(&self, widths: &[usize], line0: usize, line1: usize, out: &mut String) {
        for line in &self.lines[line0..line1] {
            for (j, cell) in line.iter().enumerate() {
                out.push_str(cell);
                if let Some(&w) = widths.get(j) {
                    out.extend(std::iter::repeat_n(' ', w.saturating_sub(width(cell))));
                }
            }
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_like_kubectl_get() {
        let t = kubectl_table(
            "NAME\tREADY\tSTATUS\tRESTARTS\tAGE\nweb-node1\t1/1\tRunning\t0\t5m\nx\t0/2\tCrashLoopBackOff\t3 (2m ago)\t2d\n",
        );
        assert_eq!(
            t,
            "NAME        READY   STATUS             RESTARTS     AGE\n\
             web-node1   1/1     Running            0            5m\n\
             x           0/2     CrashLoopBackOff   3 (2m ago)   2d\n"
        );
        // minwidth 6 for short columns
        assert_eq!(kubectl_table("A\tB\nc\td\n"), "A     B\nc     d\n");
    }

    #[test]
    fn blocks_end_at_lines_without_the_column() {
        let t = kubectl_describe("Name:\tweb\nNamespace:\tdefault\nContainers:\n  app:\n    Image:\tbusybox\n      Started:\tnow\n");
        assert_eq!(
            t,
            "Name:       web\nNamespace:  default\nContainers:\n  app:\n    Image:      busybox\n      Started:  now\n"
        );
        // Multi-byte characters count as one column each.
        assert_eq!(tabwrite("é\tx\nab\ty\n", 0, 1), "é  x\nab y\n");
    }
}

//! What the board draws, from what it knows: a pure function of the model (the state read
//! from the repository) and the person's place in it (selection, pane, prompt), so it can be
//! checked on a test backend at any size.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

/// The columns, in order: (title, colour).
pub const COLUMNS: [(&str, Color); 6] = [
    ("ready", Color::Green),
    ("running", Color::Cyan),
    ("needs you", Color::Yellow),
    ("done", Color::Blue),
    ("parked", Color::Magenta),
    ("failed", Color::Red),
];

/// One task on the board.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Card {
    pub id: String,
    pub title: String,
    /// Shown after the title: blocked, needs-decision, taken-over, …
    pub note: Option<String>,
}

/// A session running on this machine.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionRow {
    pub task: String,
    pub session: String,
    pub agent: String,
    pub try_number: u32,
    pub elapsed: String,
    /// What the task has cost so far.
    pub spent: String,
    pub last: String,
}

/// Everything read from the repository, ready to draw (text already escaped).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    /// The walk's status, the missions', what was spent: a line each.
    pub header: Vec<String>,
    /// The cards of each column of `COLUMNS`.
    pub columns: [Vec<Card>; 6],
    /// How many more tasks each column holds than it has cards for (a long backlog's ready
    /// tasks past the first 50, done tasks past the last 500): counted in its title.
    pub more: [usize; 6],
    pub sessions: Vec<SessionRow>,
    /// The journal's last events, oldest first.
    pub journal: Vec<String>,
}

impl Model {
    /// The card at a place, if there is one.
    pub fn card(&self, (column, row): (usize, usize)) -> Option<&Card> {
        self.columns.get(column)?.get(row)
    }

    /// Where the card of `id` is now, if it is on the board.
    pub fn find(&self, id: &str) -> Option<(usize, usize)> {
        self.columns.iter().enumerate().find_map(|(c, cards)| cards.iter().position(|k| k.id == id).map(|r| (c, r)))
    }
}

/// What fills the lower half when open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pane {
    None,
    /// A task's record (show), or what an action said.
    Detail {
        title: String,
        lines: Vec<String>,
    },
    /// A session's output, kept current.
    Follow {
        title: String,
        lines: Vec<String>,
    },
}

/// What the bottom line asks of the person, if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    None,
    /// A question answered with y or n.
    Confirm(String),
    /// A line of text being typed.
    Input {
        label: String,
        text: String,
    },
    /// A choice of keys, as the label says.
    Choose(String),
}

/// The person's place on the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// (column, row) of the selected card.
    pub selected: (usize, usize),
    pub pane: Pane,
    pub prompt: Prompt,
    /// The last thing that happened (an action's outcome, a sync), shown at the bottom.
    pub message: Option<String>,
}

impl Default for View {
    fn default() -> View {
        View { selected: (0, 0), pane: Pane::None, prompt: Prompt::None, message: None }
    }
}

pub const KEYS: &str =
    "←→↑↓ move · enter show · f follow · x stop · r reassign · t take over · b hand back · o reopen · p park · q quit";
/// The keys in under 80 columns.
pub const KEYS_SHORT: &str = "⏎ show f follow x stop r reassign t take-over b hand-back o reopen p park q quit";

/// The styles of the board: all plain without colour (NO_COLOR).
struct Styles {
    color: bool,
}

impl Styles {
    fn get(&self, style: Style) -> Style {
        if self.color {
            style
        } else {
            Style::default()
        }
    }
    fn title(&self, color: Color) -> Style {
        self.get(Style::default().fg(color).add_modifier(Modifier::BOLD))
    }
    fn selected(&self) -> Style {
        self.get(Style::default().add_modifier(Modifier::REVERSED))
    }
    fn dim(&self) -> Style {
        self.get(Style::default().add_modifier(Modifier::DIM))
    }
    fn warn(&self) -> Style {
        self.get(Style::default().fg(Color::Yellow).add_modifier(Modifier::BOLD))
    }
}

/// Draw the board.
pub fn draw(frame: &mut Frame<'_>, model: &Model, view: &View, color: bool) {
    let s = Styles { color };
    let area = frame.area();
    let header_height = model.header.len().min(3) as u16;
    let [header, body, footer] =
        Layout::vertical([Constraint::Length(header_height), Constraint::Min(4), Constraint::Length(1)]).areas(area);
    let header_lines: Vec<Line<'_>> =
        model.header.iter().take(3).map(|l| Line::from(Span::styled(l.as_str(), s.title(Color::White)))).collect();
    frame.render_widget(Paragraph::new(header_lines), header);

    let [columns, lower] = match view.pane {
        Pane::None => {
            let sessions = (model.sessions.len().clamp(1, 6) + 1) as u16;
            let journal = if body.height >= 30 { 11 } else { 5 };
            let [columns, sessions_area, journal_area] =
                Layout::vertical([Constraint::Min(4), Constraint::Length(sessions), Constraint::Length(journal)])
                    .areas(body);
            draw_sessions(frame, sessions_area, model, &s);
            draw_journal(frame, journal_area, model, &s);
            [columns, Rect::default()]
        }
        _ => Layout::vertical([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(body),
    };
    draw_columns(frame, columns, model, view, &s);
    match &view.pane {
        Pane::None => {}
        Pane::Detail { title, lines } | Pane::Follow { title, lines } => {
            let height = lower.height.saturating_sub(1) as usize;
            // Follow shows the end of the output; a detail its beginning.
            let shown: Vec<Line<'_>> = if matches!(view.pane, Pane::Follow { .. }) {
                lines[lines.len().saturating_sub(height)..].iter().map(|l| Line::from(l.as_str())).collect()
            } else {
                lines.iter().map(|l| Line::from(l.as_str())).collect()
            };
            let block = Block::default()
                .borders(Borders::TOP)
                .title(Span::styled(format!("{title} (esc closes)"), s.title(Color::White)));
            let paragraph = Paragraph::new(shown).block(block);
            let paragraph =
                if matches!(view.pane, Pane::Detail { .. }) { paragraph.wrap(Wrap { trim: false }) } else { paragraph };
            frame.render_widget(paragraph, lower);
        }
    }
    let bottom = match &view.prompt {
        Prompt::Confirm(question) => Line::from(Span::styled(format!("{question} (y/n)"), s.warn())),
        Prompt::Input { label, text } => Line::from(vec![
            Span::styled(format!("{label} "), s.warn()),
            Span::raw(text.as_str()),
            Span::styled("█", s.dim()),
        ]),
        Prompt::Choose(label) => Line::from(Span::styled(label.as_str(), s.warn())),
        Prompt::None => match &view.message {
            Some(message) => Line::from(message.as_str()),
            None => {
                let keys = if footer.width as usize >= KEYS.chars().count() { KEYS } else { KEYS_SHORT };
                Line::from(Span::styled(keys, s.dim()))
            }
        },
    };
    frame.render_widget(Paragraph::new(bottom), footer);
}

fn draw_columns(frame: &mut Frame<'_>, area: Rect, model: &Model, view: &View, s: &Styles) {
    let areas = Layout::horizontal([Constraint::Ratio(1, 6); 6]).split(area);
    for (c, ((name, color), cards)) in COLUMNS.iter().zip(&model.columns).enumerate() {
        let area = areas[c];
        let block = Block::default()
            .borders(Borders::TOP | Borders::RIGHT)
            .title(Span::styled(format!("{name} {}", cards.len() + model.more[c]), s.title(*color)));
        let inner = block.inner(area);
        frame.render_widget(block, area);
        // A narrow column gives each card two lines: its id (and note), then its title.
        let per_card = if inner.width < 40 { 2 } else { 1 };
        let height = inner.height as usize / per_card;
        let selected = (view.selected.0 == c).then_some(view.selected.1);
        // Keep the selected card in sight.
        let offset = match selected {
            Some(row) if height > 0 && row >= height => row + 1 - height,
            _ => 0,
        };
        let mut lines: Vec<Line<'_>> = Vec::new();
        for (row, card) in cards.iter().enumerate().skip(offset).take(height) {
            let mark = if selected == Some(row) { ">" } else { " " };
            let style = if selected == Some(row) { s.selected() } else { Style::default() };
            let note = card.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
            if per_card == 2 {
                lines.push(Line::from(Span::styled(format!("{mark}{}{note}", card.id), style)));
                lines.push(Line::from(Span::styled(format!("{mark}{}", card.title), style)));
            } else {
                lines.push(Line::from(Span::styled(format!("{mark}{}{note} {}", card.id, card.title), style)));
            }
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

fn draw_sessions(frame: &mut Frame<'_>, area: Rect, model: &Model, s: &Styles) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Span::styled(format!("sessions {}", model.sessions.len()), s.title(Color::Cyan)));
    let lines: Vec<Line<'_>> = if model.sessions.is_empty() {
        vec![Line::from(Span::styled("no session running here", s.dim()))]
    } else {
        model
            .sessions
            .iter()
            .map(|r| {
                Line::from(vec![
                    Span::raw(format!(
                        "{} {} {} try {} {} {} ",
                        r.task, r.session, r.agent, r.try_number, r.elapsed, r.spent
                    )),
                    Span::styled(format!("│ {}", r.last), s.dim()),
                ])
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_journal(frame: &mut Frame<'_>, area: Rect, model: &Model, s: &Styles) {
    let block = Block::default().borders(Borders::TOP).title(Span::styled("journal", s.title(Color::White)));
    let height = block.inner(area).height as usize;
    let lines: Vec<Line<'_>> = model.journal[model.journal.len().saturating_sub(height)..]
        .iter()
        .map(|l| Line::from(Span::styled(l.as_str(), s.dim())))
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn card(id: &str, title: &str) -> Card {
        Card { id: id.into(), title: title.into(), note: None }
    }

    fn model() -> Model {
        let mut m = Model {
            header: vec!["walk w-abc running since 2 min (pid 42 on host)".into(), "2 open · 1 done".into()],
            ..Model::default()
        };
        m.columns[0] = vec![card("t-ready1", "Write the parser"), card("t-ready2", "Add tests")];
        m.columns[1] = vec![card("t-run1", "Refactor the lexer")];
        m.columns[2] = vec![Card { id: "t-need".into(), title: "Pick a name".into(), note: Some("needs-you".into()) }];
        m.columns[3] = vec![card("t-done", "Set up CI")];
        m.columns[4] = vec![card("t-park", "Port to Windows")];
        m.columns[5] = vec![card("t-fail", "Speed up the build")];
        m.sessions = vec![SessionRow {
            task: "t-run1".into(),
            session: "s-xyz".into(),
            agent: "claude".into(),
            try_number: 2,
            elapsed: "3 min".into(),
            spent: "$0.12".into(),
            last: "running cargo test".into(),
        }];
        m.journal = vec!["12:00 t-done task_done".into(), "12:01 t-run1 session_started".into()];
        m
    }

    fn render(width: u16, height: u16, model: &Model, view: &View, color: bool) -> ratatui::buffer::Buffer {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        terminal.draw(|f| draw(f, model, view, color)).expect("draw");
        terminal.backend().buffer().clone()
    }

    fn text(buffer: &ratatui::buffer::Buffer) -> Vec<String> {
        let area = buffer.area;
        (0..area.height)
            .map(|y| (0..area.width).map(|x| buffer[(x, y)].symbol().to_owned()).collect::<String>())
            .collect()
    }

    /// The column (0..6) a screen x falls in, as the layout splits the width.
    fn column_at(width: u16, x: u16) -> usize {
        let areas = Layout::horizontal([Constraint::Ratio(1, 6); 6]).split(Rect::new(0, 0, width, 10));
        areas.iter().position(|a| x >= a.x && x < a.x + a.width).expect("inside")
    }

    fn assert_in_columns(width: u16, height: u16) {
        let m = model();
        let lines = text(&render(width, height, &m, &View::default(), true));
        for (c, cards) in m.columns.iter().enumerate() {
            for card in cards {
                let (y, x) = lines
                    .iter()
                    .enumerate()
                    .find_map(|(y, l)| l.find(card.id.as_str()).map(|x| (y, l[..x].chars().count() as u16)))
                    .unwrap_or_else(|| panic!("{} is on the {width}x{height} board:\n{}", card.id, lines.join("\n")));
                assert_eq!(column_at(width, x), c, "{} is in column {} (line {y})", card.id, COLUMNS[c].0);
            }
        }
        for (name, _) in COLUMNS {
            assert!(lines.iter().any(|l| l.contains(name)), "the {name} column is titled at {width}x{height}");
        }
        let session = lines.iter().find(|l| l.contains("s-xyz")).expect("the running session's line");
        for part in ["t-run1", "claude", "try 2", "3 min", "$0.12"] {
            assert!(session.contains(part), "the session line shows {part}: {session}");
        }
        assert!(lines.iter().any(|l| l.contains("walk w-abc running")), "the walk's status is shown");
        assert!(lines.iter().any(|l| l.contains("session_started")), "the journal's tail is shown");
    }

    #[test]
    fn at_80x24_every_task_is_in_its_states_column_with_the_running_session_and_journal() {
        assert_in_columns(80, 24);
        let lines = text(&render(80, 24, &model(), &View::default(), true));
        assert!(
            lines.iter().any(|l| l.contains("running cargo test")),
            "the session's last line:\n{}",
            lines.join("\n")
        );
    }

    #[test]
    fn at_300x80_every_task_is_in_its_states_column_with_the_running_session_and_journal() {
        assert_in_columns(300, 80);
        let lines = text(&render(300, 80, &model(), &View::default(), true));
        let session = lines.iter().find(|l| l.contains("s-xyz")).expect("session line");
        assert!(session.contains("running cargo test"), "the session's last output line: {session}");
        assert!(session.contains("Refactor") || lines.iter().any(|l| l.contains("Refactor the lexer")));
    }

    #[test]
    fn a_column_counts_the_tasks_it_has_no_cards_for() {
        let mut m = model();
        m.more[0] = 1998;
        let lines = text(&render(80, 24, &m, &View::default(), true));
        assert!(lines.iter().any(|l| l.contains("ready 2000")), "{}", lines.join("\n"));
    }

    #[test]
    fn no_color_draws_no_style_at_all_and_colour_draws_some() {
        let m = model();
        let mut view = View { selected: (1, 0), ..View::default() };
        view.prompt = Prompt::Confirm("stop t-run1's session?".into());
        let plain = render(80, 24, &m, &view, false);
        for cell in plain.content() {
            assert_eq!(
                (cell.fg, cell.bg, cell.modifier),
                (Color::Reset, Color::Reset, Modifier::empty()),
                "a cell without colour: {cell:?}"
            );
        }
        let lines = text(&plain);
        assert!(lines.iter().any(|l| l.contains(">t-run1")), "the selection shows without colour too");
        assert!(lines.last().expect("a line").contains("stop t-run1's session? (y/n)"));
        let coloured = render(80, 24, &m, &view, true);
        assert!(coloured.content().iter().any(|c| c.fg != Color::Reset || !c.modifier.is_empty()));
    }

    #[test]
    fn the_selected_card_stays_in_sight_and_a_pane_shows_the_end_of_a_followed_output() {
        let mut m = model();
        m.columns[3] = (0..40).map(|n| card(&format!("t-d{n:02}"), "done")).collect();
        let view = View {
            selected: (3, 39),
            pane: Pane::Follow { title: "s-xyz".into(), lines: (0..100).map(|n| format!("line {n}")).collect() },
            ..View::default()
        };
        let lines = text(&render(80, 24, &m, &view, true));
        assert!(lines.iter().any(|l| l.contains(">t-d39")), "the last card, selected, is shown:\n{}", lines.join("\n"));
        assert!(lines.iter().any(|l| l.contains("line 99")), "the followed output's end is shown");
        assert!(!lines.iter().any(|l| l.contains("line 0 ")), "not its beginning");
    }
}

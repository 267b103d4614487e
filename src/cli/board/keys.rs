//! What each key does: moving the selection, opening panes, and asking what a verb needs
//! (an agent, a reason, a y/n for the destructive ones) before the board runs it.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::layout::{Model, Pane, Prompt, View};

/// A verb of the command line, on one task, as the board runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verb {
    Stop,
    Reassign(String),
    TakeOver,
    /// `true`: --keep; `false`: --continue.
    HandBack(bool),
    Reopen,
    Park(String),
}

/// What the board does after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Nothing,
    Quit,
    /// Open the task's detail pane.
    Show(String),
    /// Follow the task's session output.
    Follow(String),
    /// Run a verb on a task.
    Act(String, Verb),
}

/// A verb being asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Confirm(Verb),
    Agent,
    Reason,
    HandBack,
}

/// The keys' memory: the verb whose question is on the bottom line.
#[derive(Debug, Default)]
pub struct Keys {
    pending: Option<(String, Step)>,
}

impl Keys {
    /// Handle one key press.
    pub fn handle(&mut self, view: &mut View, model: &Model, key: KeyEvent) -> Outcome {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Outcome::Quit;
        }
        if let Some((task, step)) = self.pending.take() {
            return self.answer(view, task, step, key);
        }
        let selected = model.card(view.selected).map(|c| c.id.clone());
        match key.code {
            KeyCode::Char('q') => return Outcome::Quit,
            KeyCode::Esc => {
                view.pane = Pane::None;
                view.message = None;
            }
            KeyCode::Left | KeyCode::Char('h') => self.move_to(view, model, -1),
            KeyCode::Right | KeyCode::Char('l') | KeyCode::Tab => self.move_to(view, model, 1),
            KeyCode::Up | KeyCode::Char('k') => view.selected.1 = view.selected.1.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                let len = model.columns[view.selected.0].len();
                view.selected.1 = (view.selected.1 + 1).min(len.saturating_sub(1));
            }
            code => {
                let Some(task) = selected else {
                    if matches!(code, KeyCode::Enter | KeyCode::Char(_)) {
                        view.message = Some("no task selected: move to one with the arrow keys".into());
                    }
                    return Outcome::Nothing;
                };
                return self.verb(view, task, code);
            }
        }
        Outcome::Nothing
    }

    fn move_to(&self, view: &mut View, model: &Model, by: isize) {
        let n = model.columns.len() as isize;
        let column = (view.selected.0 as isize + by).rem_euclid(n) as usize;
        let len = model.columns[column].len();
        view.selected = (column, view.selected.1.min(len.saturating_sub(1)));
    }

    fn verb(&mut self, view: &mut View, task: String, code: KeyCode) -> Outcome {
        let (step, prompt) = match code {
            KeyCode::Enter | KeyCode::Char('s') => return Outcome::Show(task),
            KeyCode::Char('f') => return Outcome::Follow(task),
            KeyCode::Char('o') => return Outcome::Act(task, Verb::Reopen),
            KeyCode::Char('x') => (
                Step::Confirm(Verb::Stop),
                Prompt::Confirm(format!("stop {task}'s session? it goes to needs-decision, its work committed")),
            ),
            KeyCode::Char('t') => (
                Step::Confirm(Verb::TakeOver),
                Prompt::Confirm(format!("take {task} over? its session stops and the loop leaves it to you")),
            ),
            KeyCode::Char('r') => {
                (Step::Agent, Prompt::Input { label: format!("reassign {task} to agent:"), text: String::new() })
            }
            KeyCode::Char('p') => {
                (Step::Reason, Prompt::Input { label: format!("park {task}, why:"), text: String::new() })
            }
            KeyCode::Char('b') => (
                Step::HandBack,
                Prompt::Choose(format!(
                    "hand {task} back: k keep it (lands if the checks pass) · c let the agent continue · esc cancel"
                )),
            ),
            _ => return Outcome::Nothing,
        };
        view.prompt = prompt;
        self.pending = Some((task, step));
        Outcome::Nothing
    }

    fn answer(&mut self, view: &mut View, task: String, step: Step, key: KeyEvent) -> Outcome {
        match (step, key.code) {
            (Step::Confirm(verb), KeyCode::Char('y' | 'Y')) => {
                view.prompt = Prompt::None;
                Outcome::Act(task, verb)
            }
            (Step::Confirm(_), _) | (_, KeyCode::Esc) => {
                view.prompt = Prompt::None;
                view.message = Some("cancelled".into());
                Outcome::Nothing
            }
            (Step::HandBack, KeyCode::Char(c @ ('k' | 'c'))) => {
                view.prompt = Prompt::None;
                Outcome::Act(task, Verb::HandBack(c == 'k'))
            }
            (Step::HandBack, _) => {
                self.pending = Some((task, Step::HandBack));
                Outcome::Nothing
            }
            (step @ (Step::Agent | Step::Reason), code) => {
                let Prompt::Input { text, .. } = &mut view.prompt else {
                    return Outcome::Nothing;
                };
                match code {
                    KeyCode::Char(c) => text.push(c),
                    KeyCode::Backspace => {
                        text.pop();
                    }
                    KeyCode::Enter if !text.trim().is_empty() => {
                        let given = text.trim().to_owned();
                        let (verb, question) = match step {
                            Step::Agent => (Verb::Reassign(given.clone()), format!("reassign {task} to {given}?")),
                            _ => (Verb::Park(given.clone()), format!("park {task} ({given})?")),
                        };
                        view.prompt = Prompt::Confirm(question);
                        self.pending = Some((task, Step::Confirm(verb)));
                        return Outcome::Nothing;
                    }
                    _ => {}
                }
                self.pending = Some((task, step));
                Outcome::Nothing
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::Card;
    use super::*;

    fn press(keys: &mut Keys, view: &mut View, model: &Model, code: KeyCode) -> Outcome {
        keys.handle(view, model, KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn model() -> Model {
        let mut m = Model::default();
        m.columns[0] = vec![Card { id: "t-a".into(), title: "a".into(), note: None }];
        m.columns[1] = vec![
            Card { id: "t-b".into(), title: "b".into(), note: None },
            Card { id: "t-c".into(), title: "c".into(), note: None },
        ];
        m
    }

    #[test]
    fn destructive_verbs_run_only_after_yes_and_reopen_at_once() {
        let m = model();
        let (mut keys, mut view) = (Keys::default(), View::default());
        press(&mut keys, &mut view, &m, KeyCode::Right);
        press(&mut keys, &mut view, &m, KeyCode::Down);
        assert_eq!(view.selected, (1, 1));
        assert_eq!(press(&mut keys, &mut view, &m, KeyCode::Char('x')), Outcome::Nothing);
        assert!(matches!(view.prompt, Prompt::Confirm(_)));
        assert_eq!(press(&mut keys, &mut view, &m, KeyCode::Char('n')), Outcome::Nothing, "no means no");
        assert_eq!(view.prompt, Prompt::None);
        press(&mut keys, &mut view, &m, KeyCode::Char('x'));
        assert_eq!(press(&mut keys, &mut view, &m, KeyCode::Char('y')), Outcome::Act("t-c".into(), Verb::Stop));
        assert_eq!(press(&mut keys, &mut view, &m, KeyCode::Char('o')), Outcome::Act("t-c".into(), Verb::Reopen));

        press(&mut keys, &mut view, &m, KeyCode::Char('p'));
        for c in "spec".chars() {
            press(&mut keys, &mut view, &m, KeyCode::Char(c));
        }
        press(&mut keys, &mut view, &m, KeyCode::Char('q'));
        press(&mut keys, &mut view, &m, KeyCode::Backspace);
        assert_eq!(press(&mut keys, &mut view, &m, KeyCode::Enter), Outcome::Nothing, "asks first");
        assert_eq!(
            press(&mut keys, &mut view, &m, KeyCode::Char('y')),
            Outcome::Act("t-c".into(), Verb::Park("spec".into()))
        );
        press(&mut keys, &mut view, &m, KeyCode::Char('b'));
        assert_eq!(press(&mut keys, &mut view, &m, KeyCode::Char('z')), Outcome::Nothing);
        assert_eq!(
            press(&mut keys, &mut view, &m, KeyCode::Char('c')),
            Outcome::Act("t-c".into(), Verb::HandBack(false))
        );
        assert_eq!(press(&mut keys, &mut view, &m, KeyCode::Char('q')), Outcome::Quit);
        assert_eq!(keys.handle(&mut view, &m, KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Outcome::Quit);
    }

    #[test]
    fn an_empty_column_selects_nothing_and_says_so() {
        let m = model();
        let (mut keys, mut view) = (Keys::default(), View::default());
        press(&mut keys, &mut view, &m, KeyCode::Left);
        assert_eq!(view.selected, (5, 0));
        assert_eq!(press(&mut keys, &mut view, &m, KeyCode::Char('x')), Outcome::Nothing);
        assert_eq!(view.prompt, Prompt::None);
        assert!(view.message.as_deref().is_some_and(|m| m.contains("no task selected")));
    }
}

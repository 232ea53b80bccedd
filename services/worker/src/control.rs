//! Commands addressed to this worker through `<prefix>.control` (routing key = its id), consumed
//! from its exclusive `<prefix>.worker.<id>` queue.
//!
//! `drain` makes the worker drain as on SIGTERM. `kill` cancels the named attempt if it runs here: its executor kills the process group and the
//! attempt ends `killed` (written by [`crate::delivery`], like any other end). A command for an
//! attempt this worker does not run is ignored: the attempt ended, or the kill was recorded in the
//! database and recovery will end it.

use chime_core::model::message::decode;
use chime_core::model::{ControlCommand, ControlMessage};
use lapin::message::Delivery;
use tracing::{debug, info, warn};

use crate::Worker;

/// Acts on one command (the control queue is consumed without acks).
pub async fn handle(worker: &Worker, delivery: Delivery) {
    let command = match decode::<ControlMessage>(&delivery.data) {
        Ok(command) => command,
        Err(error) => {
            warn!(%error, "ignoring a command that does not parse");
            return;
        }
    };
    match (command.command, command.task_id, command.attempt) {
        (ControlCommand::Kill, Some(task_id), Some(attempt)) => {
            if worker.kill(task_id, attempt) {
                info!(%task_id, attempt, "killing the task on request");
                metrics::counter!("chime_worker_kills_total").increment(1);
            } else {
                debug!(%task_id, "kill for an attempt not running here");
            }
        }
        (ControlCommand::Kill, _, _) => {
            warn!("ignoring a kill command without task_id and attempt")
        }
        (ControlCommand::Drain, _, _) => {
            info!("drain requested by command");
            worker.drain_requested.cancel();
        }
    }
}

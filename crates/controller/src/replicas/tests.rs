use std::collections::BTreeSet;

use comet_protocol::code::ResponseCode;

use super::*;

const GROUP: &str = "broker-a";

fn apply_id(r: &mut Replicas, id: u64, code: &str) -> CommandResult {
    r.apply(Command::ApplyBrokerId {
        cluster: "c".into(),
        broker_name: GROUP.into(),
        broker_id: id,
        address: format!("127.0.0.1:{}", 10900 + id),
        register_check_code: code.into(),
    })
}

fn alive(id: u64, epoch: i32, max_offset: i64) -> Candidate {
    Candidate {
        broker_id: id,
        epoch,
        max_offset,
        priority: 0,
    }
}

/// The election the controller runs by itself when a master died.
fn elect_cmd(alive: Vec<Candidate>) -> Command {
    Command::ElectMaster {
        broker_name: GROUP.into(),
        requester: None,
        designated: false,
        alive,
        allow_unclean: false,
    }
}

/// Three replicas with ids 1..=3, broker 1 elected master.
fn group_of_three() -> Replicas {
    let mut r = Replicas::default();
    for id in 1..=3 {
        assert_eq!(r.next_broker_id(GROUP), id);
        apply_id(&mut r, id, &format!("code{id}")).expect("applies");
    }
    // The first broker to ask becomes the first master.
    r.apply(Command::ElectMaster {
        broker_name: GROUP.into(),
        requester: Some(1),
        designated: false,
        alive: vec![alive(1, -1, 0)],
        allow_unclean: false,
    })
    .expect("elects");
    r
}

/// Master 1 reports all three replicas in sync.
fn all_in_sync(r: &mut Replicas) {
    r.apply(Command::AlterSyncStateSet {
        broker_name: GROUP.into(),
        master: 1,
        master_epoch: 1,
        sync_state_set_epoch: 1,
        new_set: BTreeSet::from([1, 2, 3]),
        alive: BTreeSet::from([1, 2, 3]),
    })
    .expect("all in sync");
}

fn group(r: &Replicas) -> &BrokerGroup {
    r.group(GROUP).expect("group exists")
}

fn code_of(result: CommandResult) -> i32 {
    result.expect_err("refused").code
}

#[test]
fn ids_are_handed_out_in_order_and_kept_by_their_owner() {
    let mut r = Replicas::default();
    assert_eq!(
        code_of(apply_id(&mut r, 2, "x")),
        ResponseCode::ControllerBrokerIdInvalid.code()
    );
    apply_id(&mut r, 1, "a").expect("first id");
    assert_eq!(r.next_broker_id(GROUP), 2);
    apply_id(&mut r, 3, "c").expect("an unused id of a known group");
    assert_eq!(
        r.next_broker_id(GROUP),
        3,
        "one more for every id handed out"
    );
    apply_id(&mut r, 1, "a").expect("the same broker retrying keeps its id");
    assert_eq!(
        code_of(apply_id(&mut r, 1, "b")),
        ResponseCode::ControllerBrokerIdInvalid.code(),
        "another broker cannot take a given id"
    );
}

#[test]
fn the_first_election_makes_a_master_with_epoch_one() {
    let r = group_of_three();
    let g = group(&r);
    assert_eq!(g.master, Some(1));
    assert_eq!(g.master_epoch, 1);
    assert_eq!(g.sync_state_set, BTreeSet::from([1]));
    assert_eq!(g.sync_state_set_epoch, 1);
    assert_eq!(g.master_address(), Some("127.0.0.1:10901"));
}

#[test]
fn a_living_master_stays_master() {
    let mut r = group_of_three();
    let before = r.clone();
    let refusal = r
        .apply(elect_cmd(vec![alive(1, 1, 10), alive(2, 1, 99)]))
        .expect_err("no change");
    assert_eq!(
        refusal.code,
        ResponseCode::ControllerMasterStillExist.code()
    );
    assert_eq!(refusal.group.and_then(|g| g.master), Some(1));
    assert_eq!(r, before, "a refused command changes nothing");
}

#[test]
fn only_in_sync_replicas_take_over_newest_epoch_then_longest_log() {
    let mut r = group_of_three();
    all_in_sync(&mut r);
    // Master 1 dies; 3 has the longer log at the same epoch.
    r.apply(elect_cmd(vec![alive(2, 1, 500), alive(3, 1, 700)]))
        .expect("elects");
    let g = group(&r);
    assert_eq!(g.master, Some(3));
    assert_eq!((g.master_epoch, g.sync_state_set_epoch), (2, 3));
    assert_eq!(g.sync_state_set, BTreeSet::from([3]));

    // 3 dies too; 2 is alive but no longer in the SyncStateSet: nobody may take over.
    let refusal = r
        .apply(elect_cmd(vec![alive(2, 1, 500)]))
        .expect_err("unclean election is off");
    assert_eq!(
        refusal.code,
        ResponseCode::ControllerMasterNotAvailable.code()
    );
    assert_eq!(group(&r).master, None);
    assert_eq!(
        group(&r).master_epoch,
        3,
        "the masterless state is a new epoch"
    );
    // With unclean elections allowed, 2 becomes master at a new epoch.
    r.apply(Command::ElectMaster {
        broker_name: GROUP.into(),
        requester: None,
        designated: false,
        alive: vec![alive(2, 1, 500)],
        allow_unclean: true,
    })
    .expect("unclean election");
    assert_eq!(group(&r).master, Some(2));
    assert_eq!(group(&r).master_epoch, 4);
}

#[test]
fn ties_go_to_the_lowest_priority_then_the_lowest_id() {
    let mut r = group_of_three();
    all_in_sync(&mut r);
    let mut low_priority = alive(3, 1, 100);
    low_priority.priority = -1;
    let mut tie = r.clone();
    tie.apply(elect_cmd(vec![alive(2, 1, 100), alive(3, 1, 100)]))
        .expect("elects");
    assert_eq!(group(&tie).master, Some(2));
    r.apply(elect_cmd(vec![alive(2, 1, 100), low_priority]))
        .expect("elects");
    assert_eq!(group(&r).master, Some(3));
}

#[test]
fn a_designated_master_must_be_in_sync_and_alive() {
    let mut r = group_of_three();
    let cmd = |id| Command::ElectMaster {
        broker_name: GROUP.into(),
        requester: Some(id),
        designated: true,
        alive: vec![alive(1, 1, 0), alive(2, 1, 0)],
        allow_unclean: false,
    };
    assert_eq!(
        code_of(r.apply(cmd(2))),
        ResponseCode::ControllerElectMasterFailed.code(),
        "2 is not in the SyncStateSet"
    );
    r.apply(Command::AlterSyncStateSet {
        broker_name: GROUP.into(),
        master: 1,
        master_epoch: 1,
        sync_state_set_epoch: 1,
        new_set: BTreeSet::from([1, 2]),
        alive: BTreeSet::from([1, 2]),
    })
    .expect("2 joins");
    r.apply(cmd(2)).expect("2 designated");
    assert_eq!(group(&r).master, Some(2));
}

#[test]
fn sync_state_set_changes_are_fenced_by_both_epochs() {
    let mut r = group_of_three();
    let alter =
        |master, master_epoch, ss_epoch, set: &[u64], alive: &[u64]| Command::AlterSyncStateSet {
            broker_name: GROUP.into(),
            master,
            master_epoch,
            sync_state_set_epoch: ss_epoch,
            new_set: set.iter().copied().collect(),
            alive: alive.iter().copied().collect(),
        };
    let cases = [
        (
            alter(2, 1, 1, &[1, 2], &[1, 2]),
            ResponseCode::ControllerInvalidMaster,
        ),
        (
            alter(1, 0, 1, &[1, 2], &[1, 2]),
            ResponseCode::ControllerFencedMasterEpoch,
        ),
        (
            alter(1, 1, 0, &[1, 2], &[1, 2]),
            ResponseCode::ControllerFencedSyncStateSetEpoch,
        ),
        (
            alter(1, 1, 1, &[1], &[1]),
            ResponseCode::ControllerAlterSyncStateSetFailed,
        ),
        (
            alter(1, 1, 1, &[1, 9], &[1, 9]),
            ResponseCode::ControllerInvalidReplicas,
        ),
        (
            alter(1, 1, 1, &[1, 2], &[1]),
            ResponseCode::ControllerBrokerNotAlive,
        ),
        (
            alter(1, 1, 1, &[2], &[1, 2]),
            ResponseCode::ControllerAlterSyncStateSetFailed,
        ),
    ];
    for (cmd, code) in cases {
        assert_eq!(code_of(r.apply(cmd.clone())), code.code(), "{cmd:?}");
    }
    r.apply(alter(1, 1, 1, &[1, 2], &[1, 2])).expect("valid");
    assert_eq!(group(&r).sync_state_set_epoch, 2);
    assert_eq!(
        code_of(r.apply(alter(1, 1, 1, &[1, 2, 3], &[1, 2, 3]))),
        ResponseCode::ControllerFencedSyncStateSetEpoch.code(),
        "a second change based on the old epoch is fenced"
    );
}

#[test]
fn cleaning_keeps_living_brokers_unless_asked() {
    let mut r = group_of_three();
    let clean = |ids: &[u64], living| Command::CleanBrokerData {
        broker_name: GROUP.into(),
        broker_ids: ids.iter().copied().collect(),
        clean_living: living,
        alive: BTreeSet::from([1]),
    };
    assert_eq!(
        code_of(r.apply(clean(&[1], false))),
        ResponseCode::ControllerInvalidCleanBrokerMetadata.code()
    );
    r.apply(clean(&[3], false)).expect("3 is dead");
    assert!(!group(&r).replicas.contains_key(&3));
    assert_eq!(
        r.next_broker_id(GROUP),
        4,
        "a cleaned id is not handed out again"
    );
    r.apply(clean(&[], true)).expect("the whole group");
    assert!(r.group(GROUP).is_none());
}

#[test]
fn registering_needs_an_applied_id_and_records_a_new_address() {
    let mut r = group_of_three();
    let register = |id, addr: &str| Command::RegisterBroker {
        cluster: "c".into(),
        broker_name: GROUP.into(),
        broker_id: id,
        address: addr.into(),
    };
    assert_eq!(
        code_of(r.apply(register(7, "x:1"))),
        ResponseCode::ControllerBrokerNeedToBeRegistered.code()
    );
    r.apply(register(1, "127.0.0.1:20000")).expect("registers");
    assert_eq!(group(&r).master_address(), Some("127.0.0.1:20000"));
}

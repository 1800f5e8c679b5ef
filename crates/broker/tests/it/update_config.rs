//! UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`) against a real broker: keys marked live
//! change while it runs and the broker's behaviour follows (`brokerPermission`: sends, pulls and
//! the registered routes; `maxMessageSize`: sends; `flushIntervalCommitLog`: the flush thread;
//! `slaveReadEnable` and `accessMessageInMemoryMaxRatio`: the broker pulls are sent to;
//! `fileReservedTime`, `deleteWhen` and the disk ratios: retention and the disk-full refusal;
//! `autoCreateTopicEnable`: auto-creation), GET_BROKER_CONFIG shows the new values at once, and
//! they are written to the broker's config file so a restart keeps them. Black-listed keys are
//! refused with Apache's code and remark; unknown keys, keys read only at start and bad values
//! are refused whole, and nothing changes.

use comet_protocol::RemotingCommand;
use comet_protocol::body::{TopicRouteData, from_fastjson, perm};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, ConsumerSendMsgBackRequestHeader, CreateTopicRequestHeader,
    GetRouteInfoRequestHeader, PullMessageResponseHeader, request_with_header,
};
use comet_testkit::*;

const SUCCESS: i32 = 0;
const TOPIC: &str = "PermTopic";

fn update(body: &str) -> RemotingCommand {
    RemotingCommand::request(RequestCode::UpdateBrokerConfig).with_body(body.as_bytes().to_vec())
}

fn create_topic(topic: &str) -> RemotingCommand {
    request_with_header(
        RequestCode::UpdateAndCreateTopic,
        &CreateTopicRequestHeader {
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: perm::PERM_READ_WRITE,
            ..Default::default()
        },
    )
}

/// CONSUMER_SEND_MSG_BACK of the message at commit-log offset 0.
fn send_back() -> RemotingCommand {
    let header = ConsumerSendMsgBackRequestHeader {
        offset: 0,
        group: "PermGroup".to_owned(),
        origin_topic: Some(TOPIC.to_owned()),
        ..Default::default()
    };
    request_with_header(RequestCode::ConsumerSendMsgBack, &header)
}

/// The `brokerPermission` line of GET_BROKER_CONFIG.
async fn listed_permission(broker: &TestBroker) -> String {
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetBrokerConfig))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let text = String::from_utf8(rsp.body.clone().unwrap_or_default().to_vec()).expect("utf8");
    text.lines()
        .find_map(|l| l.strip_prefix("brokerPermission="))
        .expect("brokerPermission listed")
        .to_owned()
}

/// The perm the name server's route of [`TOPIC`] carries.
async fn route_perm(broker: &TestBroker) -> Option<i32> {
    let request = request_with_header(
        RequestCode::GetRouteinfoByTopic,
        &GetRouteInfoRequestHeader {
            topic: TOPIC.to_owned(),
            ..Default::default()
        },
    );
    let rsp = broker.invoke_namesrv(request).await;
    if rsp.code != SUCCESS {
        return None;
    }
    from_fastjson::<TopicRouteData>(&rsp.body.clone().unwrap_or_default())
        .ok()
        .and_then(|r| r.queue_datas.first().map(|q| q.perm))
}

#[tokio::test]
async fn broker_permission_changes_while_running() {
    let broker = TestBroker::start().await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    assert!(wait_until(|| async { route_perm(&broker).await == Some(6) }).await);
    assert_eq!(
        broker.invoke(send_v1(TOPIC, 0, b"x", &[])).await.code,
        SUCCESS
    );

    // Read only: sends and send-backs are refused, pulls served, the routes lose WRITE.
    let rsp = broker
        .invoke(update("# from a tool\nbrokerPermission = 4\n"))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert_eq!(broker.ctx().broker_permission(), perm::PERM_READ);
    assert_eq!(listed_permission(&broker).await, "4");
    let rsp = broker.invoke(send_v1(TOPIC, 0, b"x", &[])).await;
    assert_eq!(rsp.code, ResponseCode::NoPermission.code());
    assert!(
        rsp.remark
            .unwrap_or_default()
            .contains("brokerPermission=4")
    );
    let rsp = broker.invoke(send_back()).await;
    assert_eq!(
        rsp.code,
        ResponseCode::NoPermission.code(),
        "{:?}",
        rsp.remark
    );
    assert_eq!(
        broker.invoke(pull("PermGroup", TOPIC, 0, 0, 1)).await.code,
        SUCCESS
    );
    assert!(
        wait_until(|| async { route_perm(&broker).await == Some(perm::PERM_READ) }).await,
        "the re-registered route never lost WRITE"
    );

    // Write only: pulls are refused.
    assert_eq!(
        broker.invoke(update("brokerPermission=2")).await.code,
        SUCCESS
    );
    let rsp = broker.invoke(pull("PermGroup", TOPIC, 0, 0, 1)).await;
    assert_eq!(rsp.code, ResponseCode::NoPermission.code());

    // Back to read-write: everything is served and the routes are whole again.
    assert_eq!(
        broker.invoke(update("brokerPermission:6")).await.code,
        SUCCESS
    );
    assert_eq!(listed_permission(&broker).await, "6");
    assert_eq!(
        broker.invoke(send_v1(TOPIC, 0, b"x", &[])).await.code,
        SUCCESS
    );
    let rsp = broker.invoke(send_back()).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert!(
        wait_until(|| async { route_perm(&broker).await == Some(6) }).await,
        "the re-registered route never got WRITE back"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn refused_updates_change_nothing() {
    let broker = TestBroker::start().await;
    let cases = [
        (
            "rocketmqHome=/tmp\nbrokerPermission=4",
            ResponseCode::NoPermission,
            "black list",
        ),
        (
            "brokerConfigPath=/tmp/b.conf",
            ResponseCode::NoPermission,
            "black list",
        ),
        ("configBlackList=", ResponseCode::NoPermission, "black list"),
        (
            "brokerPermission=4\nlistenPort=1",
            ResponseCode::InvalidParameter,
            "listenPort",
        ),
        (
            "brokerPermission=4\nnoSuchKey=1",
            ResponseCode::InvalidParameter,
            "noSuchKey",
        ),
        (
            "brokerPermission=8",
            ResponseCode::InvalidParameter,
            "brokerPermission",
        ),
        (
            "brokerPermission=rw",
            ResponseCode::InvalidParameter,
            "brokerPermission",
        ),
    ];
    for (body, code, named) in cases {
        let rsp = broker.invoke(update(body)).await;
        assert_eq!(rsp.code, code.code(), "{body}: {:?}", rsp.remark);
        let remark = rsp.remark.unwrap_or_default();
        assert!(remark.contains(named), "{body}: {remark}");
        assert_eq!(broker.ctx().broker_permission(), 6, "{body} changed it");
    }
    let rsp = broker
        .invoke(update("listenPort=1"))
        .await
        .remark
        .unwrap_or_default();
    assert!(rsp.contains("only when the broker starts"), "{rsp}");
    // Apache's black-list answer, word for word.
    let rsp = broker.invoke(update("rocketmqHome=/tmp")).await;
    assert_eq!(rsp.code, ResponseCode::NoPermission.code());
    assert_eq!(
        rsp.remark.as_deref(),
        Some("Can not update config in black list.")
    );
    let not_utf8 =
        RemotingCommand::request(RequestCode::UpdateBrokerConfig).with_body(vec![0xff, 0xfe]);
    assert_eq!(
        broker.invoke(not_utf8).await.code,
        ResponseCode::SystemError.code()
    );
    assert_eq!(listed_permission(&broker).await, "6");
    broker.shutdown().await;
}

/// The value GET_BROKER_CONFIG lists for `key`.
async fn listed(broker: &TestBroker, key: &str) -> String {
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetBrokerConfig))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let text = String::from_utf8(rsp.body.clone().unwrap_or_default().to_vec()).expect("utf8");
    let prefix = format!("{key}=");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("{key} not listed"))
        .to_owned()
}

/// Sends `body` as one update and asserts the broker took it.
async fn accept(broker: &TestBroker, body: &str) {
    let rsp = broker.invoke(update(body)).await;
    assert_eq!(rsp.code, SUCCESS, "{body}: {:?}", rsp.remark);
}

/// The code of a send of `size` bytes to [`TOPIC`].
async fn send_code(broker: &TestBroker, size: usize) -> i32 {
    broker
        .invoke(send_v1(TOPIC, 0, &vec![b'x'; size], &[]))
        .await
        .code
}

#[tokio::test]
async fn max_message_size_changes_what_sends_may_carry() {
    let broker = TestBroker::start_with(|c| c.max_message_size = 2048).await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    let illegal = ResponseCode::MessageIllegal.code();
    assert_eq!(send_code(&broker, 3000).await, illegal);

    // Raised above the size the broker started with: the broker and its store take it.
    accept(&broker, "maxMessageSize=8192").await;
    assert_eq!(listed(&broker, "maxMessageSize").await, "8192");
    assert_eq!(send_code(&broker, 3000).await, SUCCESS);
    assert_eq!(send_code(&broker, 9000).await, illegal);

    // Lowered: a send the broker took a moment ago is refused with Apache's code.
    accept(&broker, "maxMessageSize=1024").await;
    assert_eq!(listed(&broker, "maxMessageSize").await, "1024");
    let rsp = broker.invoke(send_v1(TOPIC, 0, &[b'x'; 1500], &[])).await;
    assert_eq!(rsp.code, illegal);
    assert!(
        rsp.remark
            .unwrap_or_default()
            .contains("maxMessageSize 1024"),
        "the remark names the limit"
    );
    assert_eq!(send_code(&broker, 1000).await, SUCCESS);
    broker.shutdown().await;
}

#[tokio::test]
async fn flush_interval_commit_log_is_read_by_the_flush_thread() {
    // An hour between flushes: nothing but a change of the period flushes what is sent.
    let broker = TestBroker::start_with(|c| c.flush_interval_commit_log_ms = 3_600_000).await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    let flushed_all = || async {
        let log = broker.store().commit_log();
        log.flushed_where() >= log.max_offset()
    };
    assert_eq!(send_code(&broker, 100).await, SUCCESS);

    // No dirty-page threshold either, so each round flushes whatever was written.
    accept(
        &broker,
        "flushIntervalCommitLog=20\nflushCommitLogLeastPages=0",
    )
    .await;
    assert_eq!(listed(&broker, "flushIntervalCommitLog").await, "20");
    assert_eq!(
        broker
            .store()
            .live_settings()
            .flush_interval_commit_log
            .as_millis(),
        20
    );
    // The change wakes the thread once; the message sent after that flush is flushed only if
    // the thread now sleeps the new period instead of the hour it started with.
    assert!(
        wait_until(flushed_all).await,
        "the change did not wake the flush"
    );
    assert_eq!(send_code(&broker, 100).await, SUCCESS);
    assert!(
        wait_until(flushed_all).await,
        "the flush thread still sleeps the period it started with"
    );
    broker.shutdown().await;
}

/// The broker a pull of [`TOPIC`] queue 0 from offset 0 tells the consumer to pull from next.
async fn suggested_broker(broker: &TestBroker) -> i64 {
    let rsp = broker.invoke(pull("SteerGroup", TOPIC, 0, 0, 1)).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let header: PullMessageResponseHeader = rsp.decode_header().expect("pull header");
    header.suggest_which_broker_id
}

#[tokio::test]
async fn slave_read_enable_and_the_memory_ratio_steer_pulls_while_running() {
    let broker = TestBroker::start().await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    for _ in 0..3 {
        assert_eq!(send_code(&broker, 100).await, SUCCESS);
    }
    broker.wait_dispatched().await;
    // With no share of memory counted as memory, every pull reads "from disk"; a master only
    // sends such a consumer to its slave (brokerId 1 by default) with slaveReadEnable.
    accept(&broker, "accessMessageInMemoryMaxRatio=0").await;
    assert_eq!(suggested_broker(&broker).await, 0);
    accept(&broker, "slaveReadEnable=true").await;
    assert_eq!(listed(&broker, "slaveReadEnable").await, "true");
    assert_eq!(suggested_broker(&broker).await, 1);
    accept(&broker, "accessMessageInMemoryMaxRatio=40").await;
    assert_eq!(suggested_broker(&broker).await, 0, "in memory: the master");
    accept(
        &broker,
        "accessMessageInMemoryMaxRatio=0\nslaveReadEnable=false",
    )
    .await;
    assert_eq!(suggested_broker(&broker).await, 0);
    broker.shutdown().await;
}

/// The store's disk usage as a fraction, as the retention thread measures it.
fn disk_used(broker: &TestBroker) -> f64 {
    comet_store::cleanup::disk_usage(broker.store().commit_log().dir())
        .ok()
        .and_then(|u| u.used_ratio())
        .unwrap_or(1.0)
}

/// A broker with 64 KiB segments, files kept `reserved_hours`, deleting only at an hour twelve
/// hours away and never counting its disk as nearly full; holding several segments.
async fn retention_broker(reserved_hours: u64) -> TestBroker {
    let far_hour = (comet_store::cleanup::local_hour_now() + 12) % 24;
    let broker = TestBroker::start_with(|c| {
        c.mapped_file_size_commit_log = 64 * 1024;
        c.file_reserved_time_hours = reserved_hours;
        c.delete_when = format!("{far_hour:02}");
        c.disk_max_used_space_ratio = 95;
        c.disk_space_clean_forcibly_ratio = 100;
        c.disk_space_warning_level_ratio = 100;
    })
    .await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    while broker.store().max_phy_offset() < 4 * 64 * 1024 {
        assert_eq!(send_code(&broker, 1024).await, SUCCESS);
    }
    broker.wait_dispatched().await;
    broker
}

/// Runs a retention round now; whether the oldest segments are gone.
async fn retention_deleted(broker: &TestBroker) -> bool {
    let store = std::sync::Arc::clone(broker.store());
    tokio::task::spawn_blocking(move || {
        store.run_cleanup_once().expect("retention round");
        store.min_phy_offset() > 0
    })
    .await
    .expect("retention task")
}

#[tokio::test]
async fn file_reserved_time_and_delete_when_change_retention_while_running() {
    let broker = retention_broker(72).await;
    let below_max_used = disk_used(&broker) < 0.95;
    if below_max_used {
        assert!(!retention_deleted(&broker).await, "deleted before its hour");
    }
    // Every file expires at once, but it is still not the hour.
    accept(&broker, "fileReservedTime=0").await;
    assert_eq!(listed(&broker, "fileReservedTime").await, "0");
    if below_max_used {
        assert!(!retention_deleted(&broker).await, "deleted before its hour");
    }
    // Now is a deletion hour (the next one too, should the hour turn meanwhile).
    let now = comet_store::cleanup::local_hour_now();
    let hours = format!("{now:02};{:02}", (now + 1) % 24);
    accept(&broker, &format!("deleteWhen={hours}")).await;
    assert_eq!(listed(&broker, "deleteWhen").await, hours);
    assert!(
        retention_deleted(&broker).await,
        "expired segments kept at a deletion hour"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn disk_ratios_change_while_running() {
    let broker = retention_broker(0).await;
    let used = disk_used(&broker);
    if used < 0.95 {
        assert!(!retention_deleted(&broker).await, "deleted before its hour");
    }
    // Above diskMaxUsedSpaceRatio (RocketMQ's floor is 10 %) expired files go at any hour.
    accept(&broker, "diskMaxUsedSpaceRatio=10").await;
    assert_eq!(listed(&broker, "diskMaxUsedSpaceRatio").await, "10");
    if used > 0.10 {
        assert!(
            retention_deleted(&broker).await,
            "expired segments kept above diskMaxUsedSpaceRatio"
        );
    }
    // Above diskSpaceWarningLevelRatio the disk is full: sends are refused until it is raised.
    accept(&broker, "diskSpaceWarningLevelRatio=0").await;
    retention_deleted(&broker).await;
    assert!(broker.store().is_disk_full());
    assert_eq!(
        send_code(&broker, 100).await,
        ResponseCode::ServiceNotAvailable.code()
    );
    accept(&broker, "diskSpaceWarningLevelRatio=100").await;
    retention_deleted(&broker).await;
    assert_eq!(send_code(&broker, 100).await, SUCCESS);
    broker.shutdown().await;
}

#[tokio::test]
async fn auto_create_topic_enable_changes_while_running() {
    let broker = TestBroker::start().await;
    assert_eq!(send_code_to(&broker, "AutoA").await, SUCCESS);
    accept(&broker, "autoCreateTopicEnable=false").await;
    assert_eq!(
        send_code_to(&broker, "AutoB").await,
        ResponseCode::TopicNotExist.code()
    );
    let tbw = broker.ctx().topic_config.select("TBW102").expect("TBW102");
    assert!(!perm::is_inherited(tbw.perm), "TBW102 still inheritable");
    accept(&broker, "autoCreateTopicEnable=true").await;
    assert_eq!(send_code_to(&broker, "AutoB").await, SUCCESS);
    broker.shutdown().await;
}

/// The code of a 10-byte send to `topic`, auto-created from TBW102 if unknown.
async fn send_code_to(broker: &TestBroker, topic: &str) -> i32 {
    broker
        .invoke(send_v1(topic, 0, b"0123456789", &[]))
        .await
        .code
}

#[tokio::test]
async fn a_bad_value_refuses_the_whole_update_and_changes_nothing() {
    let broker = TestBroker::start().await;
    let file = broker.ctx().live_config().config_file_path();
    for body in [
        "flushIntervalCommitLog=abc",
        "fileReservedTime=48\nflushIntervalCommitLog=abc",
        "fileReservedTime=48\nflushIntervalCommitLog=1",
        "fileReservedTime=48\ndeleteWhen=4am",
        "fileReservedTime=48\nmaxMessageSize=0",
        "fileReservedTime=48\nslaveReadEnable=yes",
        "fileReservedTime=48\nlistenPort=1",
        "fileReservedTime=48\nsendMessageThreadPoolNums=4",
    ] {
        let rsp = broker.invoke(update(body)).await;
        assert_eq!(
            rsp.code,
            ResponseCode::InvalidParameter.code(),
            "{body}: {:?}",
            rsp.remark
        );
        let remark = rsp.remark.unwrap_or_default();
        assert!(remark.contains("nothing was changed"), "{body}: {remark}");
        assert_eq!(listed(&broker, "fileReservedTime").await, "72", "{body}");
        assert_eq!(listed(&broker, "flushIntervalCommitLog").await, "50");
    }
    assert!(!file.exists(), "a refused update wrote {}", file.display());
    broker.shutdown().await;
}

#[tokio::test]
async fn the_configured_black_list_is_refused_like_apaches() {
    let broker = TestBroker::start_with(|c| {
        c.config_black_list = "configBlackList;brokerConfigPath;maxMessageSize".to_owned();
    })
    .await;
    for body in [
        "maxMessageSize=1024",
        "fileReservedTime=48\nconfigBlackList=",
        "brokerConfigPath=/tmp/elsewhere.conf",
    ] {
        let rsp = broker.invoke(update(body)).await;
        assert_eq!(rsp.code, ResponseCode::NoPermission.code(), "{body}");
        assert_eq!(
            rsp.remark.as_deref(),
            Some("Can not update config in black list.")
        );
    }
    assert_eq!(listed(&broker, "fileReservedTime").await, "72");
    broker.shutdown().await;
}

#[tokio::test]
async fn changes_are_written_to_the_saved_file_and_survive_a_restart() {
    let mut broker = TestBroker::start().await;
    let saved = broker.dir.path().join("store/config/broker.properties");
    assert_eq!(
        listed(&broker, "brokerConfigPath").await,
        saved.display().to_string(),
        "GET_BROKER_CONFIG shows where changes go"
    );
    accept(&broker, "flushIntervalCommitLog=900\nfileReservedTime=48").await;
    accept(&broker, "slaveReadEnable=true").await;
    let text = std::fs::read_to_string(&saved).expect("saved file");
    for line in [
        "flushIntervalCommitLog=900",
        "fileReservedTime=48",
        "slaveReadEnable=true",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in {text}");
    }
    // A broker started without a config file reads this one back (as `comet serve` does).
    broker.stop_broker().await;
    let unknown = broker.config.apply_text(&text).expect("saved file parses");
    assert!(unknown.is_empty(), "{unknown:?}");
    broker.restart_broker().await;
    assert_eq!(listed(&broker, "flushIntervalCommitLog").await, "900");
    assert_eq!(listed(&broker, "fileReservedTime").await, "48");
    assert_eq!(listed(&broker, "slaveReadEnable").await, "true");
    assert_eq!(
        broker
            .store()
            .live_settings()
            .flush_interval_commit_log
            .as_millis(),
        900
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn changes_are_written_into_the_config_file_the_broker_started_with() {
    let conf_dir = tempfile::tempdir().expect("tempdir");
    let conf = conf_dir.path().join("broker.conf");
    let original = "# operator's notes\nbrokerClusterName=DefaultCluster\n\
                    flushIntervalCommitLog = 500\nconsolePort=8080\n";
    std::fs::write(&conf, original).expect("conf written");
    let path = conf.clone();
    let broker = TestBroker::start_with(move |c| c.broker_config_path = Some(path)).await;
    accept(&broker, "flushIntervalCommitLog=900\nmaxMessageSize=65536").await;
    let text = std::fs::read_to_string(&conf).expect("conf");
    assert_eq!(
        text,
        "# operator's notes\nbrokerClusterName=DefaultCluster\nflushIntervalCommitLog=900\n\
         consolePort=8080\nmaxMessageSize=65536\n"
    );
    let backup = std::fs::read_to_string(conf_dir.path().join("broker.conf.bak")).expect("backup");
    assert_eq!(backup, original);
    broker.shutdown().await;
}

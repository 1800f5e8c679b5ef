//! UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`) against a real broker: keys marked live
//! change while it runs and the broker's behaviour follows (`brokerPermission`: sends, pulls and
//! the registered routes; `maxMessageSize`: sends; `flushIntervalCommitLog`: the flush thread;
//! `slaveReadEnable` and `accessMessageInMemoryMaxRatio`: the broker pulls are sent to;
//! `fileReservedTime`, `deleteWhen` and the disk ratios: retention and the disk-full refusal;
//! `autoCreateTopicEnable`: auto-creation; `inSyncReplicas` and `slaveTimeout`: a `SYNC_MASTER`'s
//! answers; `timerMaxDelaySec`: timer sends; `messageIndexEnable`: what is indexed;
//! `registerBrokerTimeoutMills`: registrations; the HA keys: what a slave connection is sent and
//! when it is dropped, on either side; `timerFlushIntervalMs`: the timer checkpoint;
//! `timerWheelEnable`: timer sends, POPs and the wheel itself; `namesrvAddr`, `brokerIP1` and
//! `brokerIP2`: where the broker registers and the addresses the routes and a slave are given;
//! `serverChannelMaxIdleTimeSeconds`: new connections), GET_BROKER_CONFIG shows the new values at once, and
//! they are written to the broker's config file so a restart keeps them. Black-listed keys are
//! refused with Apache's code and remark; unknown keys, keys read only at start and bad values
//! are refused whole, and nothing changes.
//!
//! Where a test starts a broker with an hour for a timeout or an interval, nothing but the
//! change of that key lets the test finish within its hang guard.

use comet_broker::config::BrokerRole;
use comet_protocol::RemotingCommand;
use comet_protocol::body::{KvTable, TopicRouteData, from_fastjson, perm};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, ConsumerSendMsgBackRequestHeader, CreateTopicRequestHeader,
    GetRouteInfoRequestHeader, PullMessageResponseHeader, request_with_header,
};
use comet_testkit::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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
        "fileReservedTime=48\ninSyncReplicas=0",
        "fileReservedTime=48\nslaveTimeout=5",
        "fileReservedTime=48\nhaSendHeartbeatInterval=-1",
        "fileReservedTime=48\nhaHousekeepingInterval=1",
        "fileReservedTime=48\nhaTransferBatchSize=0",
        "fileReservedTime=48\nhaMaxGapNotInSync=0",
        "fileReservedTime=48\nregisterBrokerTimeoutMills=0",
        "fileReservedTime=48\ntimerMaxDelaySec=0",
        "fileReservedTime=48\nmessageIndexEnable=sometimes",
        "fileReservedTime=48\nnamesrvAddr=localhost",
        "fileReservedTime=48\nbrokerIP1=broker.example",
        "fileReservedTime=48\nbrokerIP2=10.0.0",
        "fileReservedTime=48\ntimerWheelEnable=sometimes",
        "fileReservedTime=48\ntimerFlushIntervalMs=1",
        "fileReservedTime=48\nserverChannelMaxIdleTimeSeconds=86401",
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

/// An hour: a timeout or interval nothing but a change lets a test get past.
const HOUR_MS: u64 = 3_600_000;

#[tokio::test]
async fn in_sync_replicas_and_slave_timeout_change_a_sync_masters_answers() {
    let broker = TestBroker::start_with(|c| {
        c.broker_role = BrokerRole::SyncMaster;
        c.in_sync_replicas = 2;
        c.slave_timeout_ms = HOUR_MS;
    })
    .await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    // Without a slave the send is stored and its answer held for its copy; lowering
    // inSyncReplicas releases it.
    let stored = || async { broker.store().get_max_offset_in_queue(TOPIC, 0) == 1 };
    let (held, ()) = tokio::join!(send_code(&broker, 100), async {
        assert!(wait_until(stored).await, "the send was not stored");
        accept(&broker, "inSyncReplicas=1").await;
    });
    assert_eq!(held, SUCCESS, "the held answer was not released");
    assert_eq!(listed(&broker, "inSyncReplicas").await, "1");
    assert_eq!(
        send_code(&broker, 100).await,
        SUCCESS,
        "no copy to wait for"
    );

    // Two copies again, and a tenth of a second for the missing one instead of an hour.
    accept(&broker, "inSyncReplicas=2\nslaveTimeout=100").await;
    assert_eq!(listed(&broker, "slaveTimeout").await, "100");
    let flush_slave_timeout = ResponseCode::FlushSlaveTimeout.code();
    assert_eq!(send_code(&broker, 100).await, flush_slave_timeout);
    let all_stored = || async { broker.store().get_max_offset_in_queue(TOPIC, 0) == 3 };
    assert!(wait_until(all_stored).await, "every send was stored");
    broker.shutdown().await;
}

/// A timer message to "TimerLive" due `delay_sec` seconds from now.
fn timer_send(delay_sec: &str) -> RemotingCommand {
    send_v2("TimerLive", 0, b"x", &[("TIMER_DELAY_SEC", delay_sec)])
}

#[tokio::test]
async fn timer_max_delay_sec_changes_which_timer_message_is_refused() {
    let broker = TestBroker::start().await;
    assert_eq!(broker.invoke(timer_send("120")).await.code, SUCCESS);
    accept(&broker, "timerMaxDelaySec=60").await;
    assert_eq!(listed(&broker, "timerMaxDelaySec").await, "60");
    let rsp = broker.invoke(timer_send("120")).await;
    assert_eq!(rsp.code, ResponseCode::MessageIllegal.code());
    let remark = rsp.remark.unwrap_or_default();
    assert!(remark.contains("max delay 60000ms"), "{remark}");
    assert_eq!(broker.invoke(timer_send("30")).await.code, SUCCESS);
    accept(&broker, "timerMaxDelaySec=3600").await;
    assert_eq!(broker.invoke(timer_send("120")).await.code, SUCCESS);
    broker.shutdown().await;
}

/// Whether a key lookup in [`TOPIC`] finds a message with `key`.
fn indexed(broker: &TestBroker, key: &str) -> bool {
    !broker
        .store()
        .query_message(TOPIC, key, 1, 0, i64::MAX)
        .messages
        .is_empty()
}

/// Sends a message with `key` to [`TOPIC`] and waits until it is dispatched.
async fn send_keyed(broker: &TestBroker, key: &str) {
    let rsp = broker
        .invoke(send_v1(TOPIC, 0, b"x", &[("KEYS", key)]))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    broker.wait_dispatched().await;
}

#[tokio::test]
async fn message_index_enable_changes_what_new_messages_are_indexed() {
    // Started without the index: turning it on must still work.
    let broker = TestBroker::start_with(|c| c.message_index_enable = false).await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    send_keyed(&broker, "before").await;
    assert!(!indexed(&broker, "before"));

    accept(&broker, "messageIndexEnable=true").await;
    assert_eq!(listed(&broker, "messageIndexEnable").await, "true");
    send_keyed(&broker, "on").await;
    assert!(indexed(&broker, "on"), "a message sent with the index on");
    assert!(!indexed(&broker, "before"), "stored before: never indexed");

    accept(&broker, "messageIndexEnable=false").await;
    send_keyed(&broker, "off").await;
    assert!(
        !indexed(&broker, "off"),
        "a message sent with the index off"
    );
    assert!(indexed(&broker, "on"), "the old entries are still found");
    broker.shutdown().await;
}

/// A name server that takes connections and requests and never answers.
async fn silent_name_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

#[tokio::test]
async fn register_broker_timeout_mills_bounds_the_next_registration() {
    let broker = TestBroker::start_with(|c| c.register_broker_timeout_ms = HOUR_MS).await;
    let silent = silent_name_server().await;
    let outer_api = &broker.ctx().outer_api;
    outer_api.update_namesrv_addrs(vec![broker.namesrv_addr(), silent.clone()]);
    accept(&broker, "registerBrokerTimeoutMills=200").await;
    assert_eq!(listed(&broker, "registerBrokerTimeoutMills").await, "200");
    let report = tokio::time::timeout(WAIT_DEADLINE, broker.handle().register_now())
        .await
        .expect("the registration still waits for the silent name server");
    assert_eq!(report.succeeded, vec![broker.namesrv_addr()]);
    assert_eq!(report.failed.len(), 1);
    let failure = report.failed[0].to_string();
    assert!(failure.contains(&silent), "{failure}");
    broker.shutdown().await;
}

/// The runtime-info value of `key`.
async fn runtime_value(broker: &TestBroker, key: &str) -> String {
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo))
        .await;
    let kv: KvTable = from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("kv parses");
    kv.table.get(key).cloned().unwrap_or_default()
}

/// The next HA transfer frame on `stream`: its offset and body size; `None` when the master
/// closed the connection.
async fn next_frame(stream: &mut TcpStream) -> Option<(i64, usize)> {
    let mut header = [0u8; 12];
    let read = tokio::time::timeout(WAIT_DEADLINE, stream.read_exact(&mut header))
        .await
        .expect("the master sent nothing");
    if read.is_err() {
        return None;
    }
    let offset = i64::from_be_bytes(header[..8].try_into().expect("8 bytes"));
    let size = usize::try_from(i32::from_be_bytes(header[8..].try_into().expect("4 bytes")))
        .expect("a size");
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).await.expect("frame body");
    Some((offset, size))
}

/// The data frames `stream` receives until the log reaches `end`: their sizes.
async fn frames_until(stream: &mut TcpStream, end: i64) -> Vec<usize> {
    let mut sizes = Vec::new();
    loop {
        let (offset, size) = next_frame(stream).await.expect("connection open");
        if size > 0 {
            sizes.push(size);
        }
        if offset + i64::try_from(size).expect("size") >= end {
            return sizes;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_keys_change_what_a_masters_slave_connection_gets() {
    let broker = TestBroker::start_with(|c| {
        c.ha_send_heartbeat_interval_ms = HOUR_MS;
        c.ha_housekeeping_interval_ms = HOUR_MS;
    })
    .await;
    for _ in 0..3 {
        assert_eq!(send_code(&broker, 1000).await, SUCCESS);
    }
    let ha = broker.ctx().replication.master.local_addr().expect("HA");
    // A slave with an empty log: it reports 0 once and never again.
    let mut slave = TcpStream::connect(ha).await.expect("connect");
    slave.write_all(&0i64.to_be_bytes()).await.expect("report");
    let end = broker.store().max_phy_offset();
    assert_eq!(frames_until(&mut slave, end).await, [end as usize]);

    // Frames of at most 1000 bytes from the next one on.
    accept(&broker, "haTransferBatchSize=1000").await;
    assert_eq!(listed(&broker, "haTransferBatchSize").await, "1000");
    assert_eq!(send_code(&broker, 2000).await, SUCCESS);
    let (from, end) = (end, broker.store().max_phy_offset());
    let sizes = frames_until(&mut slave, end).await;
    assert!(sizes.iter().all(|s| *s <= 1000), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>() as i64, end - from);

    // The slave acknowledged nothing: in sync only while the gap allowed exceeds the log.
    let in_sync = || async { runtime_value(&broker, "haInSyncSlaveCount").await == "1" };
    assert!(
        wait_until(in_sync).await,
        "the slave's report never counted"
    );
    accept(&broker, &format!("haMaxGapNotInSync={end}")).await;
    assert_eq!(runtime_value(&broker, "haInSyncSlaveCount").await, "0");

    // A heartbeat frame, which an hour's interval would not send.
    accept(&broker, "haSendHeartbeatInterval=10").await;
    assert_eq!(next_frame(&mut slave).await, Some((end, 0)));

    // Dropped for its silence, which an hour's housekeeping would tolerate.
    accept(&broker, "haHousekeepingInterval=100").await;
    while next_frame(&mut slave).await.is_some() {}
    broker.shutdown().await;
}

/// The next offset report a slave sends its master on `stream`; `None` once the slave closed
/// the connection.
async fn next_report(stream: &mut TcpStream) -> Option<i64> {
    let mut report = [0u8; 8];
    let read = tokio::time::timeout(WAIT_DEADLINE, stream.read_exact(&mut report))
        .await
        .expect("the slave sent nothing");
    read.ok().map(|_| i64::from_be_bytes(report))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_keys_change_when_a_slave_reports_and_gives_up() {
    let master = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let master_addr = master.local_addr().expect("addr").to_string();
    let slave = TestBroker::start_with(|c| {
        c.broker_role = BrokerRole::Slave;
        c.broker_id = 1;
        c.ha_master_address = master_addr;
        c.ha_send_heartbeat_interval_ms = HOUR_MS;
        c.ha_housekeeping_interval_ms = HOUR_MS;
    })
    .await;
    let (mut stream, _) = tokio::time::timeout(WAIT_DEADLINE, master.accept())
        .await
        .expect("the slave never dialed")
        .expect("accept");
    assert_eq!(next_report(&mut stream).await, Some(0), "an empty log");

    // Reported again without anything received: a heartbeat an hour's interval would not send.
    accept(&slave, "haSendHeartbeatInterval=10").await;
    assert_eq!(listed(&slave, "haSendHeartbeatInterval").await, "10");
    assert_eq!(next_report(&mut stream).await, Some(0));

    // A master silent for a tenth of a second is given up.
    accept(&slave, "haHousekeepingInterval=100").await;
    while next_report(&mut stream).await.is_some() {}
    slave.shutdown().await;
}

/// The timer checkpoint the broker wrote last: its enqueue offset (0 before any).
fn checkpointed_enqueue_offset(broker: &TestBroker) -> i64 {
    let path = broker
        .config
        .store_path_root_dir
        .join("config")
        .join(comet_store::timer::TIMER_CHECKPOINT_FILE);
    comet_store::timer::TimerCheckpoint::load(&path)
        .expect("checkpoint readable")
        .map_or(0, |c| c.enqueue_offset)
}

/// Sends a timer message due in an hour and waits until the wheel has taken it.
async fn park_one(broker: &TestBroker) {
    assert_eq!(broker.invoke(timer_send("3600")).await.code, SUCCESS);
    let stats = || broker.ctx().timer.stats().expect("timer on");
    let sent = broker
        .store()
        .get_max_offset_in_queue(comet_protocol::naming::TIMER_TOPIC, 0);
    assert!(
        wait_until(|| async { stats().enqueue_offset >= sent }).await,
        "the wheel never took the message"
    );
}

#[tokio::test]
async fn timer_flush_interval_ms_is_read_by_the_checkpoint_task() {
    // An hour between checkpoints: nothing but a change of the period writes one while running.
    let broker = TestBroker::start_with(|c| c.timer_flush_interval_ms = HOUR_MS).await;
    park_one(&broker).await;
    assert_eq!(checkpointed_enqueue_offset(&broker), 0, "no checkpoint yet");

    accept(&broker, "timerFlushIntervalMs=20").await;
    assert_eq!(listed(&broker, "timerFlushIntervalMs").await, "20");
    assert!(
        wait_until(|| async { checkpointed_enqueue_offset(&broker) == 1 }).await,
        "the change did not wake the checkpoint task"
    );
    // Checkpointed again only if the task now waits the new period, not the hour.
    park_one(&broker).await;
    assert!(
        wait_until(|| async { checkpointed_enqueue_offset(&broker) == 2 }).await,
        "the checkpoint task still waits the period it started with"
    );
    broker.shutdown().await;
}

/// A POP of one message from [`TOPIC`]: its response code.
async fn pop_code(broker: &TestBroker) -> i32 {
    use comet_protocol::headers::{POP_INIT_MODE_MIN, PopMessageRequestHeader};
    let header = PopMessageRequestHeader {
        consumer_group: "TimerPopGroup".to_owned(),
        topic: TOPIC.to_owned(),
        queue_id: -1,
        max_msg_nums: 1,
        invisible_time: 60_000,
        poll_time: 0,
        born_time: comet_protocol::time::now_millis(),
        init_mode: POP_INIT_MODE_MIN,
        exp_type: Some("TAG".to_owned()),
        exp: Some("*".to_owned()),
        order: Some(false),
        attempt_id: None,
        rpc: Default::default(),
    };
    broker
        .invoke(request_with_header(RequestCode::PopMessage, &header))
        .await
        .code
}

/// A timer message to [`TOPIC`] queue 0 due `delay_ms` from now: the answer's code.
async fn timer_send_to_topic(broker: &TestBroker, delay_ms: &str) -> i32 {
    broker
        .invoke(send_v2(TOPIC, 0, b"t", &[("TIMER_DELAY_MS", delay_ms)]))
        .await
        .code
}

#[tokio::test]
async fn timer_wheel_enable_turns_timers_and_pops_on_and_off_while_running() {
    // Started without the wheel: turning it on must open it and start its tasks.
    let broker = TestBroker::start_with(|c| {
        c.timer_wheel_enable = false;
        c.timer_precision_ms = 100;
    })
    .await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    let system_error = ResponseCode::SystemError.code();
    assert_eq!(timer_send_to_topic(&broker, "100").await, system_error);
    assert_eq!(pop_code(&broker).await, system_error);
    assert!(broker.ctx().timer.stats().is_none(), "no wheel yet");

    accept(&broker, "timerWheelEnable=true").await;
    assert_eq!(listed(&broker, "timerWheelEnable").await, "true");
    assert_ne!(pop_code(&broker).await, system_error, "POP refused");
    assert_eq!(timer_send_to_topic(&broker, "100").await, SUCCESS);
    let delivered = |n: i64| {
        let store = std::sync::Arc::clone(broker.store());
        move || {
            let store = std::sync::Arc::clone(&store);
            async move { store.get_max_offset_in_queue(TOPIC, 0) == n }
        }
    };
    assert!(
        wait_until(delivered(1)).await,
        "the wheel opened while running never delivered"
    );
    assert!(
        broker
            .ctx()
            .topic_config
            .select("rmq_sys_wheel_timer")
            .is_some()
    );

    // Turned off: new timer messages and POPs are refused, the one parked is still delivered.
    assert_eq!(timer_send_to_topic(&broker, "300").await, SUCCESS);
    accept(&broker, "timerWheelEnable=false").await;
    let rsp = broker
        .invoke(send_v2(TOPIC, 0, b"t", &[("TIMER_DELAY_MS", "100")]))
        .await;
    assert_eq!(rsp.code, system_error);
    assert!(
        rsp.remark.unwrap_or_default().contains("timerWheelEnable"),
        "the remark names the key"
    );
    assert_eq!(pop_code(&broker).await, system_error);
    assert!(
        wait_until(delivered(2)).await,
        "the parked message was not delivered with the wheel off"
    );
    broker.shutdown().await;
}

/// The route data the test name server has for [`TOPIC`].
async fn route(broker: &TestBroker) -> Option<TopicRouteData> {
    let request = request_with_header(
        RequestCode::GetRouteinfoByTopic,
        &GetRouteInfoRequestHeader {
            topic: TOPIC.to_owned(),
            ..Default::default()
        },
    );
    let rsp = broker.invoke_namesrv(request).await;
    (rsp.code == SUCCESS)
        .then(|| from_fastjson::<TopicRouteData>(&rsp.body.clone().unwrap_or_default()).ok())
        .flatten()
}

#[tokio::test]
async fn namesrv_addr_changes_where_the_broker_registers() {
    // No name server at start, and the longest registration period.
    let broker = TestBroker::start_with(|c| {
        c.namesrv_addr = Vec::new();
        c.register_name_server_period_ms = 60_000;
    })
    .await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    assert!(route(&broker).await.is_none(), "registered with nobody");

    let namesrv = broker.namesrv_addr();
    accept(&broker, &format!("namesrvAddr={namesrv}")).await;
    assert_eq!(listed(&broker, "namesrvAddr").await, namesrv);
    assert!(
        wait_until(|| async { route(&broker).await.is_some() }).await,
        "the broker never registered with the new name server"
    );
    assert_eq!(*broker.ctx().outer_api.namesrv_addrs(), vec![namesrv]);
    broker.shutdown().await;
}

/// What the test name server answers a slave of the broker registering: the master's address
/// and HA address.
async fn master_seen_by_a_slave(broker: &TestBroker) -> (Option<String>, Option<String>) {
    use comet_protocol::body::RegisterBrokerBody;
    use comet_protocol::headers::{RegisterBrokerRequestHeader, RegisterBrokerResponseHeader};
    let header = RegisterBrokerRequestHeader {
        broker_name: broker.config.broker_name.clone(),
        broker_addr: "127.0.0.1:1".to_owned(),
        cluster_name: broker.config.broker_cluster_name.clone(),
        ha_server_addr: "127.0.0.1:2".to_owned(),
        broker_id: 1,
        ..Default::default()
    };
    let body = RegisterBrokerBody::default().encode(false).expect("body");
    let request = request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
    let rsp = broker.invoke_namesrv(request).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let answer: RegisterBrokerResponseHeader = rsp.decode_header().expect("header");
    (answer.master_addr, answer.ha_server_addr)
}

#[tokio::test]
async fn broker_ip1_and_ip2_change_the_registered_addresses() {
    let broker = TestBroker::start().await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    let port = broker.handle().local_addr().port();
    let ha_port = broker
        .ctx()
        .replication
        .master
        .local_addr()
        .expect("HA")
        .port();
    let started = format!("127.0.0.1:{port}");
    assert_eq!(
        master_seen_by_a_slave(&broker).await,
        (Some(started.clone()), Some(format!("127.0.0.1:{ha_port}")))
    );
    let route_addrs = || async {
        route(&broker)
            .await
            .map(|r| {
                r.broker_datas
                    .iter()
                    .flat_map(|b| b.broker_addrs.values().cloned())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };

    let (ip1, ip2) = ("127.0.0.2", "127.0.0.3");
    accept(&broker, &format!("brokerIP1={ip1}\nbrokerIP2={ip2}")).await;
    assert_eq!(listed(&broker, "brokerIP1").await, ip1);
    assert_eq!(listed(&broker, "brokerIP2").await, ip2);
    let moved = format!("{ip1}:{port}");
    assert!(
        wait_until(|| async { route_addrs().await.contains(&moved) }).await,
        "the routes never carried the new address"
    );
    assert!(
        !route_addrs().await.contains(&started),
        "the old address is still routed"
    );
    assert_eq!(
        master_seen_by_a_slave(&broker).await,
        (Some(moved), Some(format!("{ip2}:{ha_port}")))
    );
    // Message ids keep the address the broker started with, as Apache's do.
    assert_eq!(broker.ctx().store_host.to_string(), started);
    broker.shutdown().await;
}

/// Whether the broker closed `stream` (end of stream) rather than leaving it open and silent.
async fn closed_by_broker(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(WAIT_DEADLINE, stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn server_channel_max_idle_time_seconds_applies_to_new_connections() {
    // A day of silence tolerated at start.
    let broker = TestBroker::start_with(|c| c.server_channel_max_idle_time_seconds = 86_400).await;
    let addr = broker.handle().local_addr();
    let old = TcpStream::connect(addr).await.expect("connect");

    accept(&broker, "serverChannelMaxIdleTimeSeconds=1").await;
    assert_eq!(
        listed(&broker, "serverChannelMaxIdleTimeSeconds").await,
        "1"
    );
    let mut new = TcpStream::connect(addr).await.expect("connect");
    assert!(
        closed_by_broker(&mut new).await,
        "a silent connection accepted after the change was never closed"
    );
    // Accepted before the change (and silent for longer): it keeps its day.
    let mut buf = [0u8; 1];
    assert!(
        matches!(old.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the connection accepted before the change was closed"
    );
    broker.shutdown().await;
}

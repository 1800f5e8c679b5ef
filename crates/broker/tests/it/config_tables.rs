//! The broker's metadata tables (topics, subscription groups, consumer and delay offsets) on real
//! files in temporary directories: RocketMQ's exact file shapes, round trips, `.bak` fallback.

use std::fs;
use std::path::Path;

use comet_broker::config_tables::{
    CONSUMER_OFFSET_FILE, ConfigTables, ConsumerOffsetTable, DELAY_OFFSET_FILE, DelayOffsetTable,
    SUBSCRIPTION_GROUP_FILE, SubscriptionGroupTable, TOPICS_FILE, TopicConfigTable, config_path,
};
use comet_config_file::{ConfigFileError, bak_path, load_with_backup, persist_atomically};

type TestResult = Result<(), ConfigFileError>;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ConfigFileError + '_ {
    move |e| ConfigFileError::io(path, e)
}

/// consumerOffset.json exactly as a Java broker (fastjson PrettyFormat) writes it.
const CONSUMER_OFFSET_SAMPLE: &str = "{\n\t\"offsetTable\":{\n\t\t\"%RETRY%my_group@my_group\":{0:0\n\t\t},\n\t\t\"TopicTest@my_group\":{0:250,1:248,2:250,3:251\n\t\t}\n\t}\n}";

#[test]
fn consumer_offsets_read_and_write_fastjson_form() -> TestResult {
    let dir = tmp();
    let path = config_path(dir.path(), CONSUMER_OFFSET_FILE);
    persist_atomically(&path, CONSUMER_OFFSET_SAMPLE)?;
    let table = ConsumerOffsetTable::open(&path)?;
    assert_eq!(table.query("my_group", "TopicTest", 3), Some(251));
    assert_eq!(table.query("my_group", "%RETRY%my_group", 0), Some(0));
    assert_eq!(table.query("my_group", "TopicTest", 4), None);
    assert_eq!(
        table.topics_of_group("my_group"),
        vec!["%RETRY%my_group", "TopicTest"]
    );
    assert_eq!(table.groups_of_topic("TopicTest"), vec!["my_group"]);
    // Written back with the same offsets, and a dataVersion first as 5.x brokers write it (a
    // 4.x broker ignores it, a 5.x slave copying this table needs it).
    let written = table.encode()?;
    assert!(
        written.starts_with("{\n\t\"dataVersion\":{\n\t\t\"counter\":0,\n\t\t\"stateVersion\":0,\n\t\t\"timestamp\":"),
        "{written}"
    );
    assert!(
        written.ends_with(&format!("\n\t}},{}", &CONSUMER_OFFSET_SAMPLE[1..])),
        "{written}"
    );
    table.commit("my_group", "TopicTest", 1, 300);
    table.commit("my_group", "TopicTest", 2, 10); // lower commits replace
    table.commit("g2", "TopicTest", 12, 7);
    table.persist()?;
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    assert!(
        text.contains("\"TopicTest@my_group\":{0:250,1:300,2:10,3:251\n\t\t}"),
        "{text}"
    );
    assert!(text.contains("\"TopicTest@g2\":{12:7\n\t\t}"), "{text}");
    assert_eq!(
        fs::read_to_string(bak_path(&path)).ok().as_deref(),
        Some(CONSUMER_OFFSET_SAMPLE)
    );
    let reloaded = ConsumerOffsetTable::open(&path)?;
    assert_eq!(reloaded.snapshot(), table.snapshot());
    assert_eq!(reloaded.remove_topic("TopicTest"), 2);
    assert_eq!(reloaded.remove_group("my_group"), 1);
    assert!(reloaded.snapshot().is_empty());
    Ok(())
}

#[test]
fn consumer_offsets_accept_5x_and_standard_json() -> TestResult {
    let dir = tmp();
    let path = dir.path().join("consumerOffset.json");
    let text = r#"{"dataVersion":{"counter":4,"stateVersion":0,"timestamp":1700000000000},"offsetTable":{"T@g":{"0":5,"1":6}},"pullOffsetTable":{}}"#;
    fs::write(&path, text).map_err(io(&path))?;
    let table = ConsumerOffsetTable::open(&path)?;
    assert_eq!(
        table
            .offsets("g", "T")
            .map(|m| m.into_iter().collect::<Vec<_>>()),
        Some(vec![(0, 5), (1, 6)])
    );
    // The file's dataVersion is kept until the table changes.
    assert_eq!(table.data_version().counter, 4);
    assert_eq!(table.data_version().timestamp, 1_700_000_000_000);
    table.commit("g", "T", 0, 8);
    assert_eq!(table.data_version().counter, 5);
    Ok(())
}

/// consumerOffset.json as a 5.3.3 Java broker writes it (without its empty pullOffsetTable,
/// which Comet does not keep): written back byte for byte.
#[test]
fn consumer_offsets_keep_a_5x_file_as_is() -> TestResult {
    let dir = tmp();
    let path = config_path(dir.path(), CONSUMER_OFFSET_FILE);
    let sample = "{\n\t\"dataVersion\":{\n\t\t\"counter\":4,\n\t\t\"stateVersion\":0,\n\t\t\"timestamp\":1700000000000\n\t},\n\t\"offsetTable\":{\n\t\t\"TopicTest@my_group\":{0:250,1:248\n\t\t}\n\t}\n}";
    persist_atomically(&path, sample)?;
    let table = ConsumerOffsetTable::open(&path)?;
    assert_eq!(table.encode()?, sample);
    Ok(())
}

#[test]
fn delay_offsets_round_trip() -> TestResult {
    let dir = tmp();
    let path = config_path(dir.path(), DELAY_OFFSET_FILE);
    persist_atomically(&path, "{\n\t\"offsetTable\":{1:0,2:13,18:4\n\t}\n}")?;
    let table = DelayOffsetTable::open(&path)?;
    assert_eq!(
        (table.get(2), table.get(18), table.get(3)),
        (Some(13), Some(4), None)
    );
    table.set(3, 9);
    table.persist()?;
    assert_eq!(
        fs::read_to_string(&path).map_err(io(&path))?,
        "{\n\t\"offsetTable\":{1:0,2:13,3:9,18:4\n\t}\n}"
    );
    let empty = DelayOffsetTable::open(&dir.path().join("none.json"))?;
    assert!(empty.snapshot().is_empty());
    Ok(())
}

const TOPICS_SAMPLE: &str = "{\n\t\"dataVersion\":{\n\t\t\"counter\":5,\n\t\t\"timestamp\":1682946169710\n\t},\n\t\"topicConfigTable\":{\n\t\t\"TopicTest\":{\n\t\t\t\"order\":false,\n\t\t\t\"perm\":6,\n\t\t\t\"readQueueNums\":4,\n\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n\t\t\t\"topicName\":\"TopicTest\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\"writeQueueNums\":4\n\t\t},\n\t\t\"TBW102\":{\n\t\t\t\"order\":false,\n\t\t\t\"perm\":7,\n\t\t\t\"readQueueNums\":8,\n\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n\t\t\t\"topicName\":\"TBW102\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\"writeQueueNums\":8\n\t\t}\n\t}\n}";

#[test]
fn topics_table_load_update_persist() -> TestResult {
    let dir = tmp();
    let path = config_path(dir.path(), TOPICS_FILE);
    persist_atomically(&path, TOPICS_SAMPLE)?;
    let table = TopicConfigTable::open(&path)?;
    assert_eq!(table.names(), vec!["TBW102", "TopicTest"]);
    assert_eq!(
        table.get("TBW102").map(|t| (t.perm, t.read_queue_nums)),
        Some((7, 8))
    );
    assert_eq!(table.data_version().counter, 5);
    let mut t = table.get("TopicTest").unwrap_or_default();
    t.write_queue_nums = 8;
    assert!(table.put(t).is_some());
    let (created, was_new) = table.get_or_create("NewTopic", || {
        comet_protocol::body::TopicConfig::with_queues("x", 2, 2, 6)
    });
    assert!(was_new);
    assert_eq!(
        (created.topic_name.as_str(), created.read_queue_nums),
        ("NewTopic", 2)
    );
    assert!(table.remove("TBW102").is_some());
    assert_eq!(table.data_version().counter, 8);
    assert_eq!(table.to_wrapper().topic_config_table.len(), 2);
    table.persist()?;
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    assert!(
        text.starts_with("{\n\t\"dataVersion\":{\n\t\t\"counter\":8,"),
        "{text}"
    );
    assert!(
        text.contains("\n\t\t\"TopicTest\":{\n\t\t\t\"attributes\":{},\n\t\t\t\"order\":false,"),
        "{text}"
    );
    let reloaded = TopicConfigTable::open(&path)?;
    assert_eq!(reloaded.snapshot(), table.snapshot());
    // Main file damaged: the .bak (the sample) is used.
    fs::write(&path, "{\"topicConfigTable\":{").map_err(io(&path))?;
    let from_bak = TopicConfigTable::open(&path)?;
    assert_eq!(from_bak.names(), vec!["TBW102", "TopicTest"]);
    Ok(())
}

#[test]
fn subscription_groups_find_or_create() -> TestResult {
    let dir = tmp();
    let path = config_path(dir.path(), SUBSCRIPTION_GROUP_FILE);
    let table = SubscriptionGroupTable::open(&path)?;
    assert!(table.is_empty());
    assert!(table.find_or_create("g1", false).is_none());
    let (g, created) = table.find_or_create("g1", true).unwrap_or_default();
    assert!(created);
    assert_eq!(
        (g.retry_max_times, g.retry_queue_nums, g.consume_enable),
        (16, 1, true)
    );
    assert_eq!(
        table.find_or_create("g1", true).map(|(_, c)| c),
        Some(false)
    );
    table.persist()?;
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    assert!(
        text.contains("\t\"subscriptionGroupTable\":{\n\t\t\"g1\":{\n"),
        "{text}"
    );
    let reloaded = SubscriptionGroupTable::open(&path)?;
    assert_eq!(reloaded.find("g1"), Some(g));
    assert!(reloaded.remove("g1").is_some());
    assert!(reloaded.find("g1").is_none());
    Ok(())
}

#[test]
fn config_files_fall_back_to_bak() -> TestResult {
    let dir = tmp();
    let path = config_path(dir.path(), CONSUMER_OFFSET_FILE);
    persist_atomically(&path, CONSUMER_OFFSET_SAMPLE)?;
    persist_atomically(&path, "{\"offsetTable\":{\"T@g\":{0:1}}}")?;
    // Missing main file.
    fs::remove_file(&path).map_err(io(&path))?;
    assert_eq!(
        ConsumerOffsetTable::open(&path)?.query("my_group", "TopicTest", 0),
        Some(250)
    );
    // Empty main file.
    fs::write(&path, "").map_err(io(&path))?;
    assert_eq!(
        ConsumerOffsetTable::open(&path)?.query("my_group", "TopicTest", 0),
        Some(250)
    );
    assert_eq!(
        load_with_backup(&path)?.as_deref(),
        Some(CONSUMER_OFFSET_SAMPLE)
    );
    // Corrupt main file (a torn write).
    fs::write(&path, "{\"offsetTable\":{\"T@g\":{0:").map_err(io(&path))?;
    assert_eq!(
        ConsumerOffsetTable::open(&path)?.query("my_group", "TopicTest", 0),
        Some(250)
    );
    // Both unusable: an error, not an empty table.
    fs::write(bak_path(&path), "not json").map_err(io(&path))?;
    assert!(ConsumerOffsetTable::open(&path).is_err());
    // First start: nothing at all is an empty table.
    let tables = ConfigTables::open(&dir.path().join("fresh"))?;
    assert!(tables.topics.is_empty() && tables.consumer_offsets.snapshot().is_empty());
    tables.persist_all()?;
    assert!(config_path(&dir.path().join("fresh"), DELAY_OFFSET_FILE).exists());
    Ok(())
}

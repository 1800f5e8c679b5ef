# The checks of interop/mqadmin/daily.sh (sourced by it): `check <target>` runs every command
# against $NAMESRV and asserts what Comet and Apache RocketMQ both print.
# shellcheck shell=bash
# CONSUMER_PID and PRODUCER_PID are set here and read by daily.sh, which stops the clients.
# shellcheck disable=SC2034

# master_listed: clusterList lists a master (a broker that just booted may not be listed yet);
# sets CLUSTER, BROKER and ADDR from its line.
master_listed() {
    run cluster clusterList
    ADDR=""
    read -r CLUSTER BROKER _ ADDR _ < <(awk '$3 == "0" && $1 !~ /^#/ { print; exit }' "$WORK/out/cluster.out") || true
    [[ -n "$ADDR" ]]
}

check_topics_and_messages() {
    step "topics, groups and config reads"
    mq create updateTopic -c "$CLUSTER" -t "$TOPIC" -r 4 -w 4
    mq create_temp updateTopic -b "$ADDR" -t "$TEMP_TOPIC" -r 2 -w 2
    # updateTopicList: a JSON array of TopicConfig, sent as one UPDATE_AND_CREATE_TOPIC_LIST.
    printf '[{"topicName":"%s","readQueueNums":2,"writeQueueNums":2,"perm":6},{"topicName":"%s","readQueueNums":3,"writeQueueNums":3,"perm":6}]\n' \
        "$LIST_TOPIC_1" "$LIST_TOPIC_2" >"$WORK/topic-list.json"
    mq create_list updateTopicList -b "$ADDR" -f "$WORK/topic-list.json"
    mq subgroup updateSubGroup -c "$CLUSTER" -g "$GROUP"
    mq subgroup_temp updateSubGroup -b "$ADDR" -g "$TEMP_GROUP"
    mq subgroup_offline updateSubGroup -c "$CLUSTER" -g "$OFFLINE"
    mq status brokerStatus -b "$ADDR"
    mq ns_config getNamesrvConfig
    settle
    expect create "^create topic to $ADDR success"
    expect create "topicName=$TOPIC, readQueueNums=4, writeQueueNums=4, perm=RW-"
    expect create_temp "^create topic to $ADDR success"
    expect create_list "^submit batch of topic config to $ADDR success"
    expect subgroup "^create subscription group to $ADDR success"
    expect subgroup_temp "groupName=$TEMP_GROUP"
    expect subgroup_offline "groupName=$OFFLINE"
    for key in bootTimestamp brokerVersionDesc commitLogMaxOffset commitLogMinOffset runtime; do
        expect status "^$key +: "
    done
    expect ns_config "^=+ *$NAMESRV *=+"
    expect ns_config "^orderMessageEnable += +(true|false)$"
    wait_for "the route of $TOPIC" route_perm_is "$TOPIC" 6
    wait_for "the route of $LIST_TOPIC_1" route_perm_is "$LIST_TOPIC_1" 6
    wait_for "the route of $LIST_TOPIC_2" route_perm_is "$LIST_TOPIC_2" 6

    step "sending: sendMessage and comet produce"
    START_MS=$(($(date +%s%3N) - 1000))
    mq send sendMessage -t "$TOPIC" -p "daily sent by mqadmin" -k DailyKeyX -c TagA
    "$COMET" produce -n "$NAMESRV" "$TOPIC" --count 8 --body "daily {i}" --keys "dk{i}" --json \
        >"$WORK/produce.out" || die "comet produce failed"
    settle
    expect send "^$BROKER +[0-3] +SEND_OK +[0-9A-F]{32}"
    read -r OFFSET_ID UNIQ_ID < <(python3 -c 'import json,sys
m = [json.loads(l) for l in open(sys.argv[1])][3]
print(m["offsetMsgId"], m["msgId"])' "$WORK/produce.out")

    wait_for "the last messages sent are indexed" indexed dk7
    wait_for "the message sent by mqadmin is indexed" indexed DailyKeyX

    step "topic and message reads"
    mq list topicList
    mq list_c topicList -c
    mq route topicRoute -t "$TOPIC"
    mq tstatus topicStatus -t "$TOPIC"
    mq tcluster topicClusterList -t "$TOPIC"
    mq by_id queryMsgById -t "$TOPIC" -i "$OFFSET_ID"
    mq by_key queryMsgByKey -t "$TOPIC" -k dk3
    mq by_uniq queryMsgByUniqueKey -t "$TOPIC" -i "$UNIQ_ID"
    mq by_offset queryMsgByOffset -t "$TOPIC" -b "$BROKER" -i 0 -o 0
    mq print printMsg -t "$TOPIC" -d true
    mq consumer_config getConsumerConfig -g "$GROUP"
    mq delete_temp deleteTopic -c "$CLUSTER" -t "$TEMP_TOPIC"
    mq delete_group deleteSubGroup -c "$CLUSTER" -g "$TEMP_GROUP"
    settle
    expect list "^$TOPIC$"
    expect list "^$LIST_TOPIC_1$"
    expect list "^$LIST_TOPIC_2$"
    expect list_c "^$CLUSTER +$TOPIC( |$)"
    expect route "\"brokerName\":\"$BROKER\""
    expect route "\"readQueueNums\":4"
    expect route "\"perm\":6"
    [[ "$(count tstatus "^$BROKER +[0-3] +0 +[0-9]+")" == 4 ]] || die "topicStatus: not 4 queues of $BROKER"
    [[ "$(awk -v b="$BROKER" '$1 == b { s += $4 } END { print s }' "$WORK/out/tstatus.out")" == 9 ]] ||
        die "topicStatus: the max offsets do not add up to the 9 messages sent"
    expect tcluster "^$CLUSTER$"
    expect by_id "^Keys: +\[dk3\]"
    expect by_id "^Topic: +$TOPIC$"
    expect by_key "^[0-9A-F]{32} +[0-3] +[0-9]+"
    expect by_uniq "^Topic: +$TOPIC$"
    expect by_uniq "^Keys: +\[dk3\]"
    expect by_offset "^Queue ID: +0$"
    expect by_offset "^Queue Offset: +0$"
    [[ "$(count print "^MSGID: .* BODY: daily ")" == 9 ]] || die "printMsg: not the 9 messages sent"
    expect consumer_config "^groupName += +$GROUP$"
    expect delete_temp "^delete topic \[$TEMP_TOPIC\] from cluster \[$CLUSTER\] success"
    expect delete_group "^delete subscription group \[$TEMP_GROUP\] from broker \[$ADDR\] in cluster \[$CLUSTER\] success"
}

check_online_clients() {
    step "a Comet push consumer and a Comet producer online"
    "$COMET" consume -n "$NAMESRV" "$TOPIC" -g "$GROUP" --mode push --from first >"$WORK/consumer.out" 2>&1 &
    CONSUMER_PID=$!
    "$COMET" bench produce -n "$NAMESRV" -t "$BENCH_TOPIC" -g "$PRODUCER_GROUP" --queues 2 -p 1 -s 64 \
        --rate 5 -d 600 --threads 1 >"$WORK/producer.out" 2>&1 &
    PRODUCER_PID=$!
    wait_for "the consumer prints the 9 messages" printed 9
    wait_for "the consumer commits all 9" diff_total_is "$GROUP" 0
    CLIENT_ID="$(client_id "$GROUP")"

    step "group, connection and offset commands"
    mq connection consumerConnection -g "$GROUP"
    mq cstatus consumerStatus -g "$GROUP"
    mq cprogress consumerProgress -g "$GROUP"
    mq producers producerConnection -g "$PRODUCER_GROUP" -t "$BENCH_TOPIC"
    mq broker_stats brokerConsumeStats -b "$ADDR"
    mq stats statsAll -t "$TOPIC"
    mq clone cloneGroupOffset -s "$GROUP" -d "$OFFLINE" -t "$TOPIC" -o true
    mq list_after topicList
    mq temp_config getConsumerConfig -g "$TEMP_GROUP"
    settle
    expect connection "^$CLIENT_ID +[0-9.:]+ +RUST "
    expect connection "^ConsumeType: +CONSUME_PASSIVELY"
    expect connection "^MessageModel: +CLUSTERING"
    expect connection "^$TOPIC +\*$"
    expect cstatus "$CLIENT_ID"
    expect cstatus "Rebalance OK"
    [[ "$(count cprogress "^$TOPIC +$BROKER +[0-3] +[0-9]+ +[0-9]+ +0 ")" == 4 ]] ||
        die "consumerProgress: not 4 queues of $TOPIC without lag"
    expect cprogress "^Consume Diff Total: 0$"
    expect producers "^[0-9]+ +[^ ]+@[^ ]+ +[0-9.:]+ +RUST +V"
    expect broker_stats "^$TOPIC +$GROUP +$BROKER +[0-3] "
    expect stats "^$TOPIC +$GROUP +0 "
    expect clone "^clone group offset success\. srcGroup\[$GROUP\], destGroup=\[$OFFLINE\], topic\[$TOPIC\]"
    refute list_after "^$TEMP_TOPIC$"
    refute temp_config "^groupName += +$TEMP_GROUP$"
    local offsets
    offsets="$(consumer_offsets "$GROUP")"
    [[ "$offsets" =~ ^0:[0-9]+\ 1:[0-9]+\ 2:[0-9]+\ 3:[0-9]+$ ]] ||
        die "cloneGroupOffset: no offsets of 4 queues for $GROUP: '$offsets'"
    [[ "$(consumer_offsets "$OFFLINE")" == "$offsets" ]] ||
        die "cloneGroupOffset: $OFFLINE has $(consumer_offsets "$OFFLINE"), $GROUP has $offsets"

    step "resetOffsetByTime (the offline group, then the online group), skipAccumulatedMessage"
    mq reset_offline resetOffsetByTime -g "$OFFLINE" -t "$TOPIC" -s "$START_MS" -f true
    mq reset_online resetOffsetByTime -g "$GROUP" -t "$TOPIC" -s "$START_MS" -f true
    settle
    expect reset_offline "^#brokerName +#queueId"
    [[ "$(count reset_online "^$BROKER +[0-3] +0 *$")" == 4 ]] || die "resetOffsetByTime: not 4 queues reset to 0"
    wait_for "$OFFLINE's offsets back at the start (lag 9)" diff_total_is "$OFFLINE" 9
    wait_for "the consumer receives the 9 messages again" printed 18
    run skip skipAccumulatedMessage -g "$OFFLINE" -t "$TOPIC" -f true
    expect skip "^#brokerName +#queueId"
    wait_for "$OFFLINE's offsets at the end (lag 0)" diff_total_is "$OFFLINE" 0
    stop_clients
}

check_permissions_and_config() {
    step "updateTopicPerm, updateNamesrvConfig"
    local order
    order="$(sed -n 's/^orderMessageEnable *= *//p' "$WORK/out/ns_config.out")"
    order="$([[ "$order" == true ]] && echo false || echo true)"
    mq topic_perm updateTopicPerm -t "$TOPIC" -c "$CLUSTER" -p 4
    mq ns_update updateNamesrvConfig -k orderMessageEnable -v "$order"
    settle
    expect topic_perm "^update topic perm from 6 to 4 in $ADDR success"
    wait_for "the route of $TOPIC with perm 4" route_perm_is "$TOPIC" 4
    mq topic_perm_back updateTopicPerm -t "$TOPIC" -c "$CLUSTER" -p 6
    mq ns_read getNamesrvConfig
    mq broker_config getBrokerConfig -b "$ADDR"
    mq refused_broker updateBrokerConfig -b "$ADDR" -k brokerConfigPath -v "$WORK/elsewhere.conf"
    mq refused_ns updateNamesrvConfig -k kvConfigPath -v "$WORK/elsewhere.json"
    settle
    expect refused_broker "CODE: 16 +DESC: Can not update config in black list\."
    expect refused_ns "CODE: 16 +DESC: Can not update config in black list\."
    expect ns_read "^orderMessageEnable += +$order$"
    expect broker_config "^brokerName += +$BROKER$"
    expect broker_config "^brokerPermission += +6$"
    wait_for "the route of $TOPIC with perm 6" route_perm_is "$TOPIC" 6

    step "updateBrokerConfig brokerPermission"
    run broker_perm updateBrokerConfig -b "$ADDR" -k brokerPermission -v 4
    expect broker_perm "update broker config success, $ADDR"
    wait_for "the route of $TOPIC masked to perm 4" route_perm_is "$TOPIC" 4
    run broker_config_4 getBrokerConfig -b "$ADDR"
    expect broker_config_4 "^brokerPermission += +4$"
    run broker_perm_back updateBrokerConfig -b "$ADDR" -k brokerPermission -v 6
    wait_for "the route of $TOPIC back to perm 6" route_perm_is "$TOPIC" 6

    step "wipeWritePerm, addWritePerm"
    run wipe wipeWritePerm -b "$BROKER"
    expect wipe "^wipe write perm of broker\[$BROKER\] in name server\[$NAMESRV\] OK, [1-9]"
    wait_for "the route of $TOPIC without write" route_perm_is "$TOPIC" 4
    run add addWritePerm -b "$BROKER"
    expect add "^add write perm of broker\[$BROKER\] in name server\[$NAMESRV\] OK, [1-9]"
    wait_for "the route of $TOPIC writable again" route_perm_is "$TOPIC" 6
}

# check <target>: every command against $NAMESRV.
check() {
    local target=$1
    wait_for "clusterList lists the master" master_listed
    expect cluster "^$CLUSTER +$BROKER +0 +$ADDR "
    check_topics_and_messages
    check_online_clients
    check_permissions_and_config
    echo "mqadmin daily: PASS $(find "$WORK/out" -name '*.cmd' | wc -l) mqadmin runs (every daily command) against $target ($((SECONDS - T0))s)"
}

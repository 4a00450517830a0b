//! `kafka-consume`: the floor of reading a topic on this machine, the broker and the client
//! included: every record of every partition fetched with librdkafka under the settings
//! `floe ingest` uses (`read_committed`, 500 ms fetch wait, 20 ms queue backoff), each payload
//! copied out of the client once (as floe's reader does), nothing decoded or written. The
//! ingest benchmark runs it on the topic it produced, so a Kafka ingest's time can be read
//! against what the broker and the client alone take on the same cores.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::json;

pub fn run(brokers: String, topic: String, partitions: i32, records: u64) -> Result<()> {
    let started = Instant::now();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("client.id", "floe")
        .set("group.id", "floe-bench-kafka-consume")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_committed")
        .set("fetch.wait.max.ms", "500")
        .set("fetch.queue.backoff.ms", "20")
        .set("enable.partition.eof", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        // From offset 0, as floe's reader assigns a new table's partitions.
        tpl.add_partition_offset(&topic, p, Offset::Offset(0))?;
    }
    consumer.assign(&tpl)?;
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut block: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut first = None;
    while n < records {
        if started.elapsed() > Duration::from_secs(120) {
            bail!("read {n} of {records} records in 120 s");
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => bail!("consuming {topic}: {e}"),
            Some(Ok(m)) => {
                first.get_or_insert_with(Instant::now);
                let payload = m.payload().unwrap_or_default();
                if block.len() + payload.len() > block.capacity() {
                    block = Vec::with_capacity(1 << 20);
                }
                block.extend_from_slice(payload);
                bytes += payload.len() as u64;
                n += 1;
            }
        }
    }
    let total = started.elapsed().as_secs_f64();
    let since_first = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    println!(
        "{}",
        json!({"records": n, "bytes": bytes, "seconds": total,
               "seconds_from_first_record": since_first})
    );
    Ok(())
}

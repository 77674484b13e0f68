/*
 * ina.p4 -- the INA (in-network aggregation) pipeline that INAC programs over P4Runtime.
 * P4_16, v1model (BMv2 simple_switch_grpc). Compiled by scripts/compile-p4.sh (p4c, BMv2 back
 * end), which writes api/p4/ina.json (the BMv2 device config) and api/p4/ina.p4info.txtpb. Every
 * table, action, counter and register id is pinned with @id.
 *
 * Data plane, after SwitchML (Sapio et al., NSDI'21), ATP (Lao et al., NSDI'21) and ESA (Wang et
 * al., "Efficient Data-Plane Memory Scheduling for In-Network Aggregation", 2022); the contract
 * with core::DeriveSwitchIntents is docs/ina-pipeline.md, "Data plane (contract v2)":
 *  - Workers send gradient chunks as UDP (dst port INA_UDP_PORT) to their parameter server (PS):
 *    aggregation tag (`job_id`), chunk, aggregator slot, flags, count, bitmap, 62 int32 lanes.
 *  - `ina_job` (tag): this switch aggregates the tag (fan-in, input bitmap, result group = counter
 *    index, aggregator region, priority, the PS's address, this switch's address); `ina_worker`
 *    (tag, source): the input's bit. Aggregators live in registers (data-plane state only).
 *  - Raw chunks are summed; the aggregate, fallbacks and evicted partial sums leave for the PS
 *    from this switch's address (class UPSTREAM); retransmissions never aggregate and flush the
 *    partial sum holding their first copy; ESA preemption by strictly higher priority.
 *  - `ina_live` (tag): the tags this switch aggregates, looked up on an aggregator's occupant: an
 *    aggregator held by a tag without an entry (its job left) is free at once.
 *  - A chain child's aggregate keeps its workers' slot, moved into the parent's window by the
 *    child's `slot_shift`; every switch of a tag uses the same window.
 *  - `ina_route` (tag, class, source, destination) routes raw, upstream and result packets apart;
 *    results are replicated down a loop-free tree (destination 0 in the lookup) and `ina_host`
 *    (egress port) addresses each copy to its host (MAC and IPv4), so a UDP socket receives it.
 *  - Everything else that is IPv4 uses `ipv4_forward` (LPM); non-IPv4 is dropped.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IPPROTO_UDP = 17;
const bit<16> INA_UDP_PORT = 48864;   // 0xBEE0

const bit<8> FLAG_RESULT = 0x01;      // PS -> workers: the finished chunk
const bit<8> FLAG_FALLBACK = 0x02;    // partial or unaggregated data: the PS completes the sum
const bit<8> FLAG_AGGREGATE = 0x04;   // switch -> PS: the sum of every input of this switch
const bit<8> FLAG_RETRANSMIT = 0x08;  // worker: a copy sent again after a timeout

// Packet classes, the second key field of ina_route (core::RouteClass).
const bit<8> CLASS_RAW = 0;       // a worker's chunk on its way to its aggregation node or PS
const bit<8> CLASS_UPSTREAM = 1;  // from an aggregation switch to the PS (aggregate or fallback)
const bit<8> CLASS_RESULT = 2;    // the PS's finished chunk on its way down to the workers

#define AGG_SLOTS 32768

const bit<2> OP_NONE = 0;
const bit<2> OP_OCCUPY = 1;   // free aggregator: take it
const bit<2> OP_ADD = 2;      // same tag and chunk: add
const bit<2> OP_PREEMPT = 3;  // lower-priority occupant: swap
// (OP_FLUSH reuses OP_PREEMPT's lane masks with keep_mask 0: the packet takes the partial sum and
// the aggregator is released.)

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header ina_t {
    bit<32> job_id;     // aggregation tag (core::AggregationTag)
    bit<32> chunk;      // chunk sequence number within the iteration
    bit<32> slot;       // aggregator slot within the tag's region
    bit<8>  flags;
    bit<8>  count;      // inputs summed in this packet
    bit<16> reserved;
    bit<64> bitmap;     // inputs summed in this packet
    bit<32> v00;
    bit<32> v01;
    bit<32> v02;
    bit<32> v03;
    bit<32> v04;
    bit<32> v05;
    bit<32> v06;
    bit<32> v07;
    bit<32> v08;
    bit<32> v09;
    bit<32> v10;
    bit<32> v11;
    bit<32> v12;
    bit<32> v13;
    bit<32> v14;
    bit<32> v15;
    bit<32> v16;
    bit<32> v17;
    bit<32> v18;
    bit<32> v19;
    bit<32> v20;
    bit<32> v21;
    bit<32> v22;
    bit<32> v23;
    bit<32> v24;
    bit<32> v25;
    bit<32> v26;
    bit<32> v27;
    bit<32> v28;
    bit<32> v29;
    bit<32> v30;
    bit<32> v31;
    bit<32> v32;
    bit<32> v33;
    bit<32> v34;
    bit<32> v35;
    bit<32> v36;
    bit<32> v37;
    bit<32> v38;
    bit<32> v39;
    bit<32> v40;
    bit<32> v41;
    bit<32> v42;
    bit<32> v43;
    bit<32> v44;
    bit<32> v45;
    bit<32> v46;
    bit<32> v47;
    bit<32> v48;
    bit<32> v49;
    bit<32> v50;
    bit<32> v51;
    bit<32> v52;
    bit<32> v53;
    bit<32> v54;
    bit<32> v55;
    bit<32> v56;
    bit<32> v57;
    bit<32> v58;
    bit<32> v59;
    bit<32> v60;
    bit<32> v61;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    ina_t      ina;
}

struct metadata_t {
    bit<32> fan_in;
    bit<64> input_bitmap;
    bit<16> mcast_grp;
    bit<32> agg_base;
    bit<32> agg_count;
    bit<32> priority;
    bit<32> upstream_addr;
    bit<32> self_addr;
    bit<8>  pkt_class;
    bit<8>  input_index;
    bit<32> agg_index;
    bit<2>  op;
    bit<1>  complete;
    bit<1>  consumed;
    bit<32> add_mask;   // all ones: the aggregator's lanes are part of the sum
    bit<32> swap_mask;  // all ones: the packet leaves with the aggregator's old lanes
    bit<32> keep_mask;  // 0 when the aggregator is released, else all ones
    bit<32> slot_shift; // added to the slot of what leaves for the PS (a chain child's parent)
    bit<32> occupant;   // the tag holding the aggregator, looked up in ina_live
}

parser ParserImpl(packet_in packet, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            IPPROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            INA_UDP_PORT: parse_ina;
            default: accept;
        }
    }
    state parse_ina {
        packet.extract(hdr.ina);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control IngressImpl(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    // Per-job packet counters, indexed by the job's multicast group id (1..65535).
    @id(0x12000001) counter(65536, CounterType.packets) job_aggregated;
    @id(0x12000002) counter(65536, CounterType.packets) job_preempted;
    @id(0x12000003) counter(65536, CounterType.packets) job_fallback;

    // Aggregator memory (data-plane state only).
    @id(0x16000001) register<bit<64>>(AGG_SLOTS) agg_tag;       // tag ++ chunk
    @id(0x16000002) register<bit<64>>(AGG_SLOTS) agg_bitmap;    // 0: free
    @id(0x16000003) register<bit<8>>(AGG_SLOTS) agg_fill;   // inputs summed so far
    @id(0x16000004) register<bit<32>>(AGG_SLOTS) agg_prio;
    @id(0x16000005) register<bit<32>>(AGG_SLOTS) agg_upstream;
    @id(0x16000006) register<bit<16>>(AGG_SLOTS) agg_group;
    @id(0x16000010) register<bit<32>>(AGG_SLOTS) agg_v00;
    @id(0x16000011) register<bit<32>>(AGG_SLOTS) agg_v01;
    @id(0x16000012) register<bit<32>>(AGG_SLOTS) agg_v02;
    @id(0x16000013) register<bit<32>>(AGG_SLOTS) agg_v03;
    @id(0x16000014) register<bit<32>>(AGG_SLOTS) agg_v04;
    @id(0x16000015) register<bit<32>>(AGG_SLOTS) agg_v05;
    @id(0x16000016) register<bit<32>>(AGG_SLOTS) agg_v06;
    @id(0x16000017) register<bit<32>>(AGG_SLOTS) agg_v07;
    @id(0x16000018) register<bit<32>>(AGG_SLOTS) agg_v08;
    @id(0x16000019) register<bit<32>>(AGG_SLOTS) agg_v09;
    @id(0x1600001A) register<bit<32>>(AGG_SLOTS) agg_v10;
    @id(0x1600001B) register<bit<32>>(AGG_SLOTS) agg_v11;
    @id(0x1600001C) register<bit<32>>(AGG_SLOTS) agg_v12;
    @id(0x1600001D) register<bit<32>>(AGG_SLOTS) agg_v13;
    @id(0x1600001E) register<bit<32>>(AGG_SLOTS) agg_v14;
    @id(0x1600001F) register<bit<32>>(AGG_SLOTS) agg_v15;
    @id(0x16000020) register<bit<32>>(AGG_SLOTS) agg_v16;
    @id(0x16000021) register<bit<32>>(AGG_SLOTS) agg_v17;
    @id(0x16000022) register<bit<32>>(AGG_SLOTS) agg_v18;
    @id(0x16000023) register<bit<32>>(AGG_SLOTS) agg_v19;
    @id(0x16000024) register<bit<32>>(AGG_SLOTS) agg_v20;
    @id(0x16000025) register<bit<32>>(AGG_SLOTS) agg_v21;
    @id(0x16000026) register<bit<32>>(AGG_SLOTS) agg_v22;
    @id(0x16000027) register<bit<32>>(AGG_SLOTS) agg_v23;
    @id(0x16000028) register<bit<32>>(AGG_SLOTS) agg_v24;
    @id(0x16000029) register<bit<32>>(AGG_SLOTS) agg_v25;
    @id(0x1600002A) register<bit<32>>(AGG_SLOTS) agg_v26;
    @id(0x1600002B) register<bit<32>>(AGG_SLOTS) agg_v27;
    @id(0x1600002C) register<bit<32>>(AGG_SLOTS) agg_v28;
    @id(0x1600002D) register<bit<32>>(AGG_SLOTS) agg_v29;
    @id(0x1600002E) register<bit<32>>(AGG_SLOTS) agg_v30;
    @id(0x1600002F) register<bit<32>>(AGG_SLOTS) agg_v31;
    @id(0x16000030) register<bit<32>>(AGG_SLOTS) agg_v32;
    @id(0x16000031) register<bit<32>>(AGG_SLOTS) agg_v33;
    @id(0x16000032) register<bit<32>>(AGG_SLOTS) agg_v34;
    @id(0x16000033) register<bit<32>>(AGG_SLOTS) agg_v35;
    @id(0x16000034) register<bit<32>>(AGG_SLOTS) agg_v36;
    @id(0x16000035) register<bit<32>>(AGG_SLOTS) agg_v37;
    @id(0x16000036) register<bit<32>>(AGG_SLOTS) agg_v38;
    @id(0x16000037) register<bit<32>>(AGG_SLOTS) agg_v39;
    @id(0x16000038) register<bit<32>>(AGG_SLOTS) agg_v40;
    @id(0x16000039) register<bit<32>>(AGG_SLOTS) agg_v41;
    @id(0x1600003A) register<bit<32>>(AGG_SLOTS) agg_v42;
    @id(0x1600003B) register<bit<32>>(AGG_SLOTS) agg_v43;
    @id(0x1600003C) register<bit<32>>(AGG_SLOTS) agg_v44;
    @id(0x1600003D) register<bit<32>>(AGG_SLOTS) agg_v45;
    @id(0x1600003E) register<bit<32>>(AGG_SLOTS) agg_v46;
    @id(0x1600003F) register<bit<32>>(AGG_SLOTS) agg_v47;
    @id(0x16000040) register<bit<32>>(AGG_SLOTS) agg_v48;
    @id(0x16000041) register<bit<32>>(AGG_SLOTS) agg_v49;
    @id(0x16000042) register<bit<32>>(AGG_SLOTS) agg_v50;
    @id(0x16000043) register<bit<32>>(AGG_SLOTS) agg_v51;
    @id(0x16000044) register<bit<32>>(AGG_SLOTS) agg_v52;
    @id(0x16000045) register<bit<32>>(AGG_SLOTS) agg_v53;
    @id(0x16000046) register<bit<32>>(AGG_SLOTS) agg_v54;
    @id(0x16000047) register<bit<32>>(AGG_SLOTS) agg_v55;
    @id(0x16000048) register<bit<32>>(AGG_SLOTS) agg_v56;
    @id(0x16000049) register<bit<32>>(AGG_SLOTS) agg_v57;
    @id(0x1600004A) register<bit<32>>(AGG_SLOTS) agg_v58;
    @id(0x1600004B) register<bit<32>>(AGG_SLOTS) agg_v59;
    @id(0x1600004C) register<bit<32>>(AGG_SLOTS) agg_v60;
    @id(0x1600004D) register<bit<32>>(AGG_SLOTS) agg_v61;

    @id(0x01000001)
    action set_job(bit<32> fan_in, bit<64> input_bitmap, bit<16> mcast_grp, bit<32> agg_base,
                   bit<32> agg_count, bit<32> priority, bit<32> upstream_addr,
                   bit<32> self_addr, bit<32> slot_shift) {
        meta.fan_in = fan_in;
        meta.input_bitmap = input_bitmap;
        meta.mcast_grp = mcast_grp;
        meta.agg_base = agg_base;
        meta.agg_count = agg_count;
        meta.priority = priority;
        meta.upstream_addr = upstream_addr;
        meta.self_addr = self_addr;
        meta.slot_shift = slot_shift;
    }

    @id(0x01000002)
    action set_input(bit<8> index) {
        meta.input_index = index;
    }

    @id(0x01000003)
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @id(0x01000004)
    action multicast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @id(0x01000005)
    action drop() {
        mark_to_drop(standard_metadata);
    }

    @id(0x02000001)
    table ina_job {
        key = {
            hdr.ina.job_id : exact;
        }
        actions = {
            set_job;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = 4096;
    }

    @id(0x02000002)
    table ina_worker {
        key = {
            hdr.ina.job_id : exact;
            hdr.ipv4.src_addr : exact;
        }
        actions = {
            set_input;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = 65536;
    }

    @id(0x02000003)
    table ina_route {
        key = {
            hdr.ina.job_id : exact;
            meta.pkt_class : exact;
            hdr.ipv4.src_addr : exact;
            hdr.ipv4.dst_addr : exact;
        }
        actions = {
            forward;
            multicast;
            drop;
        }
        default_action = drop();
        size = 65536;
    }

    // The tags this switch aggregates, keyed by an aggregator's occupant: an occupant without an
    // entry belongs to a job that left (cancelled, finished, re-planned to other tags), so its
    // aggregator is free at once, whatever its priority.
    @id(0x01000010)
    action occupant_live() {
    }

    @id(0x02000006)
    table ina_live {
        key = {
            meta.occupant : exact;
        }
        actions = {
            occupant_live;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = 4096;
    }

    @id(0x02000004)
    table ipv4_forward {
        key = {
            hdr.ipv4.dst_addr : lpm;
        }
        actions = {
            forward;
            drop;
        }
        default_action = drop();
        size = 4096;
    }

    // Lane update at meta.agg_index, straight-line code with masks (no conditional inside):
    //   sum = (aggregator & add_mask) + packet
    //   aggregator = sum & keep_mask
    //   packet = swap_mask ? old aggregator : sum
    // OP_OCCUPY / OP_ADD: add all ones (a free aggregator holds zeros), swap 0; a stale aggregator
    // is overwritten with add 0. OP_PREEMPT: add 0, swap all ones (the packet takes the evicted
    // partial sum). Flush: as OP_PREEMPT with keep 0. keep 0 also when the sum is complete.
    @id(0x01000006)
    action update_lanes() {
        bit<32> old;
        bit<32> sum;
        agg_v00.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v00;
        agg_v00.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v00 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v01.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v01;
        agg_v01.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v01 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v02.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v02;
        agg_v02.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v02 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v03.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v03;
        agg_v03.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v03 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v04.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v04;
        agg_v04.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v04 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v05.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v05;
        agg_v05.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v05 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v06.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v06;
        agg_v06.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v06 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v07.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v07;
        agg_v07.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v07 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v08.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v08;
        agg_v08.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v08 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v09.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v09;
        agg_v09.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v09 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v10.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v10;
        agg_v10.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v10 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v11.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v11;
        agg_v11.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v11 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v12.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v12;
        agg_v12.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v12 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v13.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v13;
        agg_v13.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v13 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v14.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v14;
        agg_v14.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v14 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v15.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v15;
        agg_v15.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v15 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v16.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v16;
        agg_v16.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v16 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v17.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v17;
        agg_v17.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v17 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v18.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v18;
        agg_v18.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v18 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v19.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v19;
        agg_v19.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v19 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v20.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v20;
        agg_v20.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v20 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v21.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v21;
        agg_v21.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v21 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v22.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v22;
        agg_v22.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v22 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v23.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v23;
        agg_v23.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v23 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v24.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v24;
        agg_v24.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v24 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v25.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v25;
        agg_v25.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v25 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v26.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v26;
        agg_v26.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v26 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v27.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v27;
        agg_v27.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v27 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v28.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v28;
        agg_v28.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v28 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v29.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v29;
        agg_v29.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v29 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v30.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v30;
        agg_v30.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v30 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v31.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v31;
        agg_v31.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v31 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v32.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v32;
        agg_v32.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v32 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v33.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v33;
        agg_v33.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v33 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v34.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v34;
        agg_v34.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v34 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v35.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v35;
        agg_v35.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v35 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v36.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v36;
        agg_v36.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v36 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v37.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v37;
        agg_v37.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v37 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v38.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v38;
        agg_v38.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v38 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v39.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v39;
        agg_v39.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v39 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v40.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v40;
        agg_v40.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v40 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v41.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v41;
        agg_v41.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v41 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v42.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v42;
        agg_v42.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v42 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v43.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v43;
        agg_v43.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v43 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v44.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v44;
        agg_v44.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v44 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v45.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v45;
        agg_v45.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v45 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v46.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v46;
        agg_v46.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v46 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v47.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v47;
        agg_v47.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v47 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v48.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v48;
        agg_v48.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v48 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v49.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v49;
        agg_v49.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v49 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v50.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v50;
        agg_v50.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v50 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v51.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v51;
        agg_v51.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v51 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v52.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v52;
        agg_v52.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v52 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v53.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v53;
        agg_v53.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v53 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v54.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v54;
        agg_v54.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v54 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v55.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v55;
        agg_v55.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v55 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v56.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v56;
        agg_v56.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v56 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v57.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v57;
        agg_v57.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v57 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v58.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v58;
        agg_v58.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v58 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v59.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v59;
        agg_v59.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v59 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v60.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v60;
        agg_v60.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v60 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
        agg_v61.read(old, meta.agg_index);
        sum = (old & meta.add_mask) + hdr.ina.v61;
        agg_v61.write(meta.agg_index, sum & meta.keep_mask);
        hdr.ina.v61 = (sum & ~meta.swap_mask) | (old & meta.swap_mask);
    }

    // The aggregator at meta.agg_index is released (zeroed state; update_lanes zeroes the lanes).
    @id(0x01000007)
    action release_aggregator() {
        agg_tag.write(meta.agg_index, 0);
        agg_bitmap.write(meta.agg_index, 0);
        agg_fill.write(meta.agg_index, 0);
        agg_prio.write(meta.agg_index, 0);
        agg_upstream.write(meta.agg_index, 0);
        agg_group.write(meta.agg_index, 0);
    }

    // The packet leaves this aggregation switch for the PS (class UPSTREAM): its source becomes
    // this switch, so routes and the PS tell it apart from the workers' raw chunks; its bitmap
    // names the inputs of this switch whose data it carries; its slot moves into the window of a
    // parent that re-aggregates it (a chain: slot_shift, 0 elsewhere).
    @id(0x01000008)
    action to_upstream(bit<8> flag, bit<64> bitmap, bit<8> count, bit<32> upstream) {
        hdr.ina.flags = hdr.ina.flags | flag;
        hdr.ina.slot = hdr.ina.slot + meta.slot_shift;
        hdr.ina.bitmap = bitmap;
        hdr.ina.count = count;
        hdr.ipv4.src_addr = meta.self_addr;
        hdr.ipv4.dst_addr = upstream;
    }

    apply {
        meta.consumed = 0;
        if (!hdr.ipv4.isValid()) {
            // INAC's fabric carries IPv4 only (hosts use static neighbour entries, no ARP).
            mark_to_drop(standard_metadata);
            return;
        }
        if (hdr.ipv4.ttl <= 1) {
            // A hop limit for every packet, results included.
            mark_to_drop(standard_metadata);
            return;
        }
        if (!hdr.ina.isValid()) {
            ipv4_forward.apply();
            return;
        }
        bit<1> retransmit = 0;
        if ((hdr.ina.flags & FLAG_RETRANSMIT) != 0) {
            retransmit = 1;
        }
        if ((hdr.ina.flags & FLAG_RESULT) != 0) {
            // Results are replicated down the tag's tree; the last hop addresses each copy to its
            // host (EgressImpl, ina_host).
            hdr.ipv4.dst_addr = 0;
        } else if ((hdr.ina.flags & FLAG_FALLBACK) == 0 && ina_job.apply().hit &&
                   ina_worker.apply().hit) {
            // A raw chunk of an input of this switch, or the aggregate of a child switch.
            bit<64> my_bit = ((bit<64>)1) << meta.input_index;
            if (hdr.ina.slot >= meta.agg_count || meta.agg_base + hdr.ina.slot >= AGG_SLOTS) {
                // No aggregator for the slot: the PS sums it.
                to_upstream(FLAG_FALLBACK, my_bit, hdr.ina.count, meta.upstream_addr);
                job_fallback.count((bit<32>)meta.mcast_grp);
            } else {
                meta.agg_index = meta.agg_base + hdr.ina.slot;
                bit<64> my_tag = hdr.ina.job_id ++ hdr.ina.chunk;
                bit<64> tag;
                bit<64> bitmap;
                bit<8> count;
                bit<32> prio;
                bit<32> upstream;
                bit<16> group;
                agg_tag.read(tag, meta.agg_index);
                agg_bitmap.read(bitmap, meta.agg_index);
                agg_fill.read(count, meta.agg_index);
                agg_prio.read(prio, meta.agg_index);
                agg_upstream.read(upstream, meta.agg_index);
                agg_group.read(group, meta.agg_index);
                // Same tag, another chunk: the old chunk is complete (a worker only reuses a slot
                // after the result of its previous chunk), so its leftovers are stale.
                bit<1> stale = 0;
                if (bitmap != 0 && tag[63:32] == hdr.ina.job_id && tag != my_tag &&
                        retransmit == 0) {
                    bitmap = 0;
                    stale = 1;
                }
                // Another tag's leftovers: free when that tag is no longer aggregated here (its
                // job left), whatever the priority it held the aggregator with.
                if (bitmap != 0 && tag[63:32] != hdr.ina.job_id) {
                    meta.occupant = tag[63:32];
                    if (!ina_live.apply().hit) {
                        bitmap = 0;
                        stale = 1;
                    }
                }

                meta.op = OP_NONE;
                bit<1> flush = 0;
                bit<64> new_bitmap = my_bit;
                bit<8> new_count = hdr.ina.count;
                if (retransmit == 1) {
                    // A copy sent again never aggregates. If the aggregator holds this input's
                    // first copy, the packet takes the partial sum to the PS and frees the
                    // aggregator (nobody else will complete it); otherwise it goes on alone.
                    if (bitmap != 0 && tag == my_tag && (bitmap & my_bit) != 0) {
                        flush = 1;
                        meta.op = OP_PREEMPT;
                    }
                } else if (bitmap == 0) {
                    meta.op = OP_OCCUPY;
                } else if (tag == my_tag) {
                    if ((bitmap & my_bit) != 0) {
                        // A duplicate of an input already summed.
                        mark_to_drop(standard_metadata);
                        meta.consumed = 1;
                    } else {
                        meta.op = OP_ADD;
                        new_bitmap = bitmap | my_bit;
                        new_count = count + hdr.ina.count;
                    }
                } else if ((int<32>)meta.priority > (int<32>)prio &&
                           my_bit != meta.input_bitmap) {
                    meta.op = OP_PREEMPT;
                }

                if (meta.op == OP_NONE) {
                    if (meta.consumed == 0) {
                        // Held by an equal or higher priority, or a retransmission: unaggregated.
                        to_upstream(FLAG_FALLBACK, my_bit, hdr.ina.count, meta.upstream_addr);
                        job_fallback.count((bit<32>)meta.mcast_grp);
                    }
                } else {
                    meta.complete = 0;
                    if (flush == 0 && new_bitmap == meta.input_bitmap) {
                        meta.complete = 1;
                    }
                    meta.add_mask = 0xFFFFFFFF;
                    meta.swap_mask = 0;
                    meta.keep_mask = 0xFFFFFFFF;
                    if (meta.op == OP_PREEMPT) {
                        meta.add_mask = 0;
                        meta.swap_mask = 0xFFFFFFFF;
                        if (flush == 1) {
                            meta.keep_mask = 0;
                        }
                    } else {
                        if (stale == 1) {
                            meta.add_mask = 0;
                        }
                        if (meta.complete == 1) {
                            meta.keep_mask = 0;
                        }
                    }
                    update_lanes();
                    if (flush == 0) {
                        job_aggregated.count((bit<32>)meta.mcast_grp);
                    }

                    if (flush == 1) {
                        // The partial sum (this input's first copy among them) goes to the PS.
                        release_aggregator();
                        to_upstream(FLAG_FALLBACK, bitmap, count, meta.upstream_addr);
                        job_fallback.count((bit<32>)meta.mcast_grp);
                    } else if (meta.op != OP_PREEMPT && meta.complete == 1) {
                        // Release; the packet carries the sum upstream.
                        release_aggregator();
                        to_upstream(FLAG_AGGREGATE, new_bitmap, new_count, meta.upstream_addr);
                    } else {
                        agg_tag.write(meta.agg_index, my_tag);
                        agg_bitmap.write(meta.agg_index, new_bitmap);
                        agg_fill.write(meta.agg_index, new_count);
                        agg_prio.write(meta.agg_index, meta.priority);
                        agg_upstream.write(meta.agg_index, meta.upstream_addr);
                        agg_group.write(meta.agg_index, meta.mcast_grp);
                        if (meta.op == OP_PREEMPT) {
                            // ESA: the evicted partial sum leaves for its own PS, from this
                            // switch (which aggregates the evicted tag too).
                            hdr.ina.job_id = tag[63:32];
                            hdr.ina.chunk = tag[31:0];
                            to_upstream(FLAG_FALLBACK, bitmap, count, upstream);
                            job_preempted.count((bit<32>)group);
                        } else {
                            // Absorbed into the aggregator.
                            mark_to_drop(standard_metadata);
                            meta.consumed = 1;
                        }
                    }
                }
            }
        }
        if (meta.consumed == 1) {
            return;
        }
        meta.pkt_class = CLASS_RAW;
        if ((hdr.ina.flags & FLAG_RESULT) != 0) {
            meta.pkt_class = CLASS_RESULT;
        } else if ((hdr.ina.flags & (FLAG_FALLBACK | FLAG_AGGREGATE)) != 0) {
            meta.pkt_class = CLASS_UPSTREAM;
        }
        ina_route.apply();
    }
}

control EgressImpl(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    // The host behind a host-facing port: frames to it carry its MAC address (so its kernel
    // accepts them), and a result replicated to it carries its IPv4 address (so an ordinary UDP
    // socket receives it).
    @id(0x01000009)
    action to_host(bit<48> mac, bit<32> addr) {
        hdr.ethernet.dst_addr = mac;
        if (hdr.ina.isValid() && (hdr.ina.flags & FLAG_RESULT) != 0) {
            hdr.ipv4.dst_addr = addr;
        }
    }

    @id(0x02000005)
    table ina_host {
        key = {
            standard_metadata.egress_port : exact;
        }
        actions = {
            to_host;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = 1024;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            ina_host.apply();
        }
        // The switch rewrites INA packets; UDP checksum 0 means "none" for IPv4.
        if (hdr.ina.isValid()) {
            hdr.udp.checksum = 0;
        }
    }
}

control ComputeChecksumImpl(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control DeparserImpl(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.ina);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(), ComputeChecksumImpl(),
         DeparserImpl()) main;

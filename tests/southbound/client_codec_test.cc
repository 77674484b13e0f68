// Unit tests of the southbound client's codec layer: canonical byte strings, P4Info resolution,
// the intent translator, the entity diff, Write error decoding and the reconnect backoff.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "google/rpc/code.pb.h"
#include "google/rpc/status.pb.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/backoff.h"
#include "southbound/bytestrings.h"
#include "southbound/entity_codec.h"
#include "southbound/entity_diff.h"
#include "southbound/grpc_status.h"
#include "southbound/intent_translator.h"
#include "southbound/p4info_index.h"
#include "southbound/testing/write_status.h"

namespace inac::southbound {
namespace {

std::string B(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

// --- Canonical byte strings ---

TEST(BytestringsTest, EncodesShortestBigEndian) {
  EXPECT_EQ(EncodeCanonical(0), B({0}));
  EXPECT_EQ(EncodeCanonical(1), B({1}));
  EXPECT_EQ(EncodeCanonical(0x100), B({1, 0}));
  EXPECT_EQ(EncodeCanonical(0x0a000001), B({0x0a, 0, 0, 1}));
  EXPECT_EQ(EncodeCanonical(~uint64_t{0}), std::string(8, '\xff'));
}

TEST(BytestringsTest, EncodeFieldChecksWidth) {
  EXPECT_EQ(*EncodeField(511, 9), B({1, 0xff}));
  EXPECT_FALSE(EncodeField(512, 9).ok());
  EXPECT_FALSE(EncodeField(256, 8).ok());
  EXPECT_EQ(*EncodeField(~uint64_t{0}, 64), std::string(8, '\xff'));
  EXPECT_FALSE(EncodeField(1, 0).ok());
}

TEST(BytestringsTest, CanonicalizeStripsPaddingAndFillsEmpty) {
  EXPECT_EQ(Canonicalize(B({0, 0, 0, 7})), B({7}));
  EXPECT_EQ(Canonicalize(B({0, 0})), B({0}));
  EXPECT_EQ(Canonicalize(""), B({0}));
  EXPECT_EQ(Canonicalize(B({1, 0})), B({1, 0}));
}

TEST(BytestringsTest, DecodesAnyPaddingAndRejectsOver64Bits) {
  EXPECT_EQ(*DecodeUint(B({0, 0, 1, 2})), 0x102u);
  EXPECT_EQ(*DecodeUint(""), 0u);
  EXPECT_EQ(*DecodeUint(B({0, 0, 0, 0, 0, 0, 0, 0, 0, 5})), 5u);
  EXPECT_EQ(DecodeUint(B({1, 0, 0, 0, 0, 0, 0, 0, 0})).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(BytestringsTest, FitsBitwidth) {
  EXPECT_TRUE(FitsBitwidth(B({0, 0x01, 0xff}), 9));
  EXPECT_FALSE(FitsBitwidth(B({0x02, 0x00}), 9));
  EXPECT_TRUE(FitsBitwidth(B({0}), 1));
  EXPECT_TRUE(FitsBitwidth("", 1));
}

// --- P4Info ---

TEST(P4InfoIndexTest, ResolvesInaNamesAndAliases) {
  auto index = P4InfoIndex::EmbeddedIna();
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index->TableId("IngressImpl.ina_job"), 0x02000001u);
  EXPECT_EQ(*index->TableId("ina_route"), 0x02000003u);
  EXPECT_EQ(*index->TableId("IngressImpl.ina_live"), 0x02000006u);
  EXPECT_EQ(*index->ActionId("IngressImpl.set_job"), 0x01000001u);
  EXPECT_EQ(*index->ActionId("IngressImpl.occupant_live"), 0x01000010u);
  EXPECT_EQ(*index->CounterId("IngressImpl.job_fallback"), 0x12000003u);
  auto field = index->MatchField(0x02000002, "hdr.ipv4.src_addr");
  ASSERT_TRUE(field.ok());
  EXPECT_EQ(field->id, 2u);
  EXPECT_EQ(field->bitwidth, 32);
  auto param = index->ActionParam(0x01000003, "port");
  ASSERT_TRUE(param.ok());
  EXPECT_EQ(param->bitwidth, 9);
}

TEST(P4InfoIndexTest, EmbeddedCopyEqualsTheFile) {
  auto embedded = P4InfoIndex::EmbeddedIna();
  auto file = P4InfoIndex::FromFile(std::string(INAC_P4_DIR) + "/ina.p4info.txtpb");
  ASSERT_TRUE(embedded.ok());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(embedded->Fingerprint(), file->Fingerprint());
}

TEST(P4InfoIndexTest, UnknownNamesAreNotFoundWithTheName) {
  auto index = P4InfoIndex::EmbeddedIna();
  ASSERT_TRUE(index.ok());
  auto table = index->TableId("IngressImpl.no_such_table");
  EXPECT_EQ(table.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(table.status().message().find("no_such_table"), std::string::npos);
  EXPECT_EQ(index->MatchField(0x02000001, "hdr.bogus").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(index->ActionParam(0x01000001, "bogus").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(index->MatchField(42, "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(P4InfoIndex::FromFile("/nonexistent/p4info.txtpb").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(P4InfoIndexTest, RejectsBadTextAndDuplicateIds) {
  EXPECT_EQ(P4InfoIndex::FromText("tables { preamble { id: ").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto dup = P4InfoIndex::FromText(R"pb(
    tables { preamble { id: 33554433 name: "a" } }
    tables { preamble { id: 33554433 name: "b" } }
  )pb");
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(P4InfoIndexTest, TranslatorNamesWhatThePipelineLacks) {
  auto index = P4InfoIndex::FromText(R"pb(
    tables { preamble { id: 33554433 name: "IngressImpl.ina_job" alias: "ina_job" } }
  )pb");
  ASSERT_TRUE(index.ok());
  auto translator = IntentTranslator::Create(*index);
  EXPECT_EQ(translator.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(translator.status().message().find("set_job"), std::string::npos)
      << translator.status();
}

// --- Translator ---

class TranslatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto index = P4InfoIndex::EmbeddedIna();
    ASSERT_TRUE(index.ok());
    auto translator = IntentTranslator::Create(*index);
    ASSERT_TRUE(translator.ok()) << translator.status();
    translator_ = std::make_unique<IntentTranslator>(*std::move(translator));
  }

  static core::SwitchIntent SampleIntent() {
    core::SwitchIntent intent;
    intent.switch_id = "tor1";
    intent.version = 3;
    intent.jobs.push_back(core::JobAggregationIntent{/*tag=*/57, /*job_id=*/7, /*fan_in=*/2,
                                                     /*input_bitmap=*/0b11,
                                                     /*multicast_group=*/58,
                                                     /*aggregator_base=*/0,
                                                     /*aggregator_count=*/256,
                                                     /*priority=*/-2,
                                                     /*upstream_address=*/0x0a000064});
    intent.inputs.push_back(core::AggregationInputIntent{57, 7, 0x0a000001, 0});
    intent.inputs.push_back(core::AggregationInputIntent{57, 7, 0x0a000002, 1});
    intent.routes.push_back(core::RouteIntent{57, 7, 0x0a000001, 0x0a000064, 3, 0});
    intent.routes.push_back(core::RouteIntent{57, 7, 0x0a000064, 0, 0, 58});
    intent.routes.push_back(core::RouteIntent{57, 7, 0x0a000009, 0x0a000064, 0, 0});
    intent.multicast_groups.push_back(core::MulticastGroupIntent{58, 7, {1, 2}});
    return intent;
  }

  std::unique_ptr<IntentTranslator> translator_;
};

TEST_F(TranslatorTest, TranslatesEveryIntentKindInDependencyOrder) {
  auto entities = translator_->Translate(SampleIntent());
  ASSERT_TRUE(entities.ok()) << entities.status();
  ASSERT_EQ(entities->size(), 8u);

  // Multicast group first.
  const auto& group = (*entities)[0].packet_replication_engine_entry().multicast_group_entry();
  EXPECT_EQ(group.multicast_group_id(), 58u);
  ASSERT_EQ(group.replicas_size(), 2);
  EXPECT_EQ(ReplicaPort(group.replicas(0)), 1u);
  EXPECT_EQ(ReplicaPort(group.replicas(1)), 2u);
  EXPECT_EQ(group.replicas(1).instance(), 0u);

  // ina_job: key = tag, params in declaration order, priority as two's complement.
  const auto& job = (*entities)[1].table_entry();
  EXPECT_EQ(job.table_id(), 0x02000001u);
  ASSERT_EQ(job.match_size(), 1);
  EXPECT_EQ(job.match(0).field_id(), 1u);
  EXPECT_EQ(job.match(0).exact().value(), B({57}));
  EXPECT_EQ(job.metadata(), "7");
  const auto& set_job = job.action().action();
  EXPECT_EQ(set_job.action_id(), 0x01000001u);
  ASSERT_EQ(set_job.params_size(), 9);
  EXPECT_EQ(set_job.params(0).value(), B({2}));                       // fan_in
  EXPECT_EQ(set_job.params(1).value(), B({3}));                       // input_bitmap
  EXPECT_EQ(set_job.params(2).value(), B({58}));                      // mcast_grp
  EXPECT_EQ(set_job.params(3).value(), B({0}));                       // agg_base
  EXPECT_EQ(set_job.params(4).value(), B({1, 0}));                    // agg_count
  EXPECT_EQ(set_job.params(5).value(), B({0xff, 0xff, 0xff, 0xfe}));  // priority -2
  EXPECT_EQ(set_job.params(6).value(), B({0x0a, 0, 0, 0x64}));        // upstream_addr
  EXPECT_EQ(set_job.params(7).param_id(), 8u);                        // self_addr
  EXPECT_EQ(set_job.params(8).value(), B({0}));                       // slot_shift

  // ina_live: key = tag, no parameters, beside its ina_job entry.
  const auto& live = (*entities)[2].table_entry();
  EXPECT_EQ(live.table_id(), 0x02000006u);
  ASSERT_EQ(live.match_size(), 1);
  EXPECT_EQ(live.match(0).exact().value(), B({57}));
  EXPECT_EQ(live.action().action().action_id(), 0x01000010u);
  EXPECT_EQ(live.action().action().params_size(), 0);
  EXPECT_EQ(live.metadata(), "7");

  // ina_worker entries.
  const auto& input = (*entities)[4].table_entry();
  EXPECT_EQ(input.table_id(), 0x02000002u);
  EXPECT_EQ(input.match(1).exact().value(), B({0x0a, 0, 0, 2}));
  EXPECT_EQ(input.action().action().params(0).value(), B({1}));
  EXPECT_EQ(input.metadata(), "7");

  // ina_route: forward, multicast, drop.
  const auto& forward = (*entities)[5].table_entry();
  EXPECT_EQ(forward.table_id(), 0x02000003u);
  EXPECT_EQ(forward.action().action().action_id(), 0x01000003u);
  EXPECT_EQ(forward.action().action().params(0).value(), B({3}));
  EXPECT_EQ(forward.match_size(), 4);                   // tag, class, source, destination
  EXPECT_EQ(forward.match(1).exact().value(), B({0}));  // class raw
  const auto& multicast = (*entities)[6].table_entry();
  EXPECT_EQ(multicast.match(3).exact().value(), B({0}));  // destination 0
  EXPECT_EQ(multicast.action().action().action_id(), 0x01000004u);
  EXPECT_EQ(multicast.action().action().params(0).value(), B({58}));
  const auto& drop = (*entities)[7].table_entry();
  EXPECT_EQ(drop.action().action().action_id(), 0x01000005u);
  EXPECT_EQ(drop.action().action().params_size(), 0);

  // The translator's output is already canonical.
  for (const auto& entity : *entities) {
    auto canonical = CanonicalEntity(entity);
    ASSERT_TRUE(canonical.ok());
    EXPECT_EQ(EntityFingerprint(*canonical), EntityFingerprint(entity));
  }

  // A chain child's negative upstream_slot_shift travels as its two's complement.
  core::SwitchIntent shifted = SampleIntent();
  shifted.jobs[0].upstream_slot_shift = -16;
  auto shifted_entities = translator_->Translate(shifted);
  ASSERT_TRUE(shifted_entities.ok()) << shifted_entities.status();
  const auto& shifted_job = (*shifted_entities)[1].table_entry().action().action();
  ASSERT_EQ(shifted_job.params_size(), 9);
  EXPECT_EQ(shifted_job.params(8).param_id(), 9u);
  EXPECT_EQ(shifted_job.params(8).value(), B({0xff, 0xff, 0xff, 0xf0}));
}

TEST_F(TranslatorTest, RejectsValuesThatDoNotFitThePipeline) {
  core::SwitchIntent intent = SampleIntent();
  intent.inputs[0].index = 256;  // bit<8>
  EXPECT_EQ(translator_->Translate(intent).status().code(), absl::StatusCode::kInvalidArgument);

  intent = SampleIntent();
  intent.routes[0].egress_port = 512;  // bit<9>
  EXPECT_EQ(translator_->Translate(intent).status().code(), absl::StatusCode::kInvalidArgument);

  intent = SampleIntent();
  intent.routes[0].multicast_group = 58;  // both port and group
  EXPECT_EQ(translator_->Translate(intent).status().code(), absl::StatusCode::kInvalidArgument);

  intent = SampleIntent();
  intent.jobs[0].multicast_group = 70000;  // bit<16>
  auto status = translator_->Translate(intent).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("mcast_grp"), std::string::npos) << status;

  intent = SampleIntent();
  intent.multicast_groups[0].group_id = 0;
  EXPECT_EQ(translator_->Translate(intent).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TranslatorTest, CounterFiltersAndDecodeUseTheTagsGroup) {
  core::SwitchIntent intent = SampleIntent();
  auto filters = translator_->CounterFilters(intent);
  ASSERT_EQ(filters.size(), 3u);
  for (const auto& f : filters) EXPECT_EQ(f.counter_entry().index().index(), 58);

  std::vector<p4::v1::Entity> read(1);
  auto* cell = read[0].mutable_counter_entry();
  cell->set_counter_id(0x12000001);
  cell->mutable_index()->set_index(58);
  cell->mutable_data()->set_packet_count(41);
  auto counters = translator_->DecodeCounters(intent, read);
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0].tag, 57u);
  EXPECT_EQ(counters[0].job_id, 7);
  EXPECT_EQ(counters[0].aggregated.packets, 41);
  EXPECT_EQ(counters[0].fallback.packets, 0);
}

// --- Diff ---

TEST_F(TranslatorTest, DiffOfEqualStateIsEmptyEvenWithPaddedReadBack) {
  auto desired = translator_->Translate(SampleIntent());
  ASSERT_TRUE(desired.ok());
  std::vector<p4::v1::Entity> current = *desired;
  // Targets may answer with padded byte strings, shuffled params and replicas.
  auto* entry = current[1].mutable_table_entry();
  entry->mutable_match(0)->mutable_exact()->set_value(B({0, 0, 0, 57}));
  entry->mutable_action()->mutable_action()->mutable_params()->SwapElements(0, 6);
  entry->mutable_counter_data()->set_packet_count(99);  // read-only data is ignored
  auto* group =
      current[0].mutable_packet_replication_engine_entry()->mutable_multicast_group_entry();
  group->mutable_replicas()->SwapElements(0, 1);
  group->mutable_replicas(0)->set_port(B({0, 2}));  // the v1.4 byte-string form
  auto diff = DiffEntities(*translator_, current, *desired);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_TRUE(diff->deletes.empty());
  EXPECT_TRUE(diff->modifies.empty());
  EXPECT_TRUE(diff->inserts.empty());
  EXPECT_EQ(diff->unchanged, 8);
}

TEST_F(TranslatorTest, DiffDeletesRoutesBeforeGroupsAndInsertsGroupsFirst) {
  auto old_entities = translator_->Translate(SampleIntent());
  ASSERT_TRUE(old_entities.ok());
  core::SwitchIntent next = SampleIntent();
  next.jobs[0].aggregator_count = 128;     // modify
  next.routes.erase(next.routes.begin());  // delete (key gone)
  next.routes.push_back(core::RouteIntent{57, 7, 0x0a000003, 0x0a000064, 4, 0});  // insert
  next.multicast_groups.push_back(core::MulticastGroupIntent{90, 8, {5}});        // insert
  auto desired = translator_->Translate(next);
  ASSERT_TRUE(desired.ok());
  // Something INAC does not own must be left alone.
  std::vector<p4::v1::Entity> current = *old_entities;
  p4::v1::Entity foreign;
  foreign.mutable_table_entry()->set_table_id(0x02000004);
  current.push_back(foreign);

  auto diff = DiffEntities(*translator_, current, *desired);
  ASSERT_TRUE(diff.ok());
  EXPECT_EQ(diff->current, 8);  // the foreign entry is not INAC's
  ASSERT_EQ(diff->deletes.size(), 1u);
  EXPECT_EQ(diff->deletes[0].type(), p4::v1::Update::DELETE);
  EXPECT_EQ(diff->deletes[0].entity().table_entry().table_id(), 0x02000003u);
  ASSERT_EQ(diff->modifies.size(), 1u);
  EXPECT_EQ(diff->modifies[0].entity().table_entry().table_id(), 0x02000001u);
  ASSERT_EQ(diff->inserts.size(), 2u);
  EXPECT_TRUE(diff->inserts[0].entity().has_packet_replication_engine_entry());
  EXPECT_EQ(diff->inserts[1].entity().table_entry().table_id(), 0x02000003u);
  EXPECT_EQ(diff->unchanged, 6);  // the group, ina_live, two inputs, two routes
}

TEST_F(TranslatorTest, DiffRejectsConflictingDuplicatesInTheIntent) {
  core::SwitchIntent intent = SampleIntent();
  core::RouteIntent twin = intent.routes[0];
  twin.egress_port = 9;
  intent.routes.push_back(twin);
  auto desired = translator_->Translate(intent);
  ASSERT_TRUE(desired.ok());
  EXPECT_EQ(DiffEntities(*translator_, {}, *desired).status().code(),
            absl::StatusCode::kInvalidArgument);
  intent.routes.back() = intent.routes[0];  // an exact duplicate is harmless
  desired = translator_->Translate(intent);
  ASSERT_TRUE(desired.ok());
  auto diff = DiffEntities(*translator_, {}, *desired);
  ASSERT_TRUE(diff.ok());
  EXPECT_EQ(diff->inserts.size(), 8u);
}

// --- Write error decoding ---

TEST(WriteStatusTest, DecodesOneErrorPerUpdate) {
  std::vector<absl::Status> results = {absl::OkStatus(), absl::AlreadyExistsError("dup"),
                                       absl::OkStatus()};
  grpc::Status status = EncodeWriteStatus(results);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNKNOWN);
  auto decoded = DecodeWriteStatus(status, 3);
  ASSERT_TRUE(decoded.ok());
  ASSERT_EQ(decoded->size(), 3u);
  EXPECT_TRUE((*decoded)[0].ok());
  EXPECT_EQ((*decoded)[1].code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ((*decoded)[1].message(), "dup");
  EXPECT_TRUE((*decoded)[2].ok());
}

TEST(WriteStatusTest, RpcWideErrorsAreNotSpreadOverUpdates) {
  auto decoded = DecodeWriteStatus(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "backup"), 4);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kPermissionDenied);
  // A details count that does not match the batch cannot be attributed either.
  grpc::Status short_details = EncodeWriteStatus({absl::InternalError("x"), absl::OkStatus()});
  EXPECT_EQ(DecodeWriteStatus(short_details, 3).status().code(), absl::StatusCode::kUnknown);
}

TEST(WriteStatusTest, SingleUpdateWithoutDetailsTakesTheTopLevelCode) {
  auto decoded = DecodeWriteStatus(grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "exists"), 1);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ((*decoded)[0].code(), absl::StatusCode::kAlreadyExists);
  auto ok = DecodeWriteStatus(grpc::Status::OK, 2);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE((*ok)[0].ok() && (*ok)[1].ok());
}

// --- Backoff ---

TEST(ExponentialBackoffTest, GrowsCapsAndJittersDeterministically) {
  BackoffPolicy policy{absl::Milliseconds(100), absl::Seconds(1), 2.0, 0.5};
  ExponentialBackoff middle(policy, [] { return 0.5; });  // no jitter
  EXPECT_EQ(middle.Next(), absl::Milliseconds(100));
  EXPECT_EQ(middle.Next(), absl::Milliseconds(200));
  EXPECT_EQ(middle.Next(), absl::Milliseconds(400));
  EXPECT_EQ(middle.Next(), absl::Milliseconds(800));
  EXPECT_EQ(middle.Next(), absl::Seconds(1));
  EXPECT_EQ(middle.Next(), absl::Seconds(1));
  middle.Reset();
  EXPECT_EQ(middle.Next(), absl::Milliseconds(100));

  ExponentialBackoff low(policy, [] { return 0.0; });  // -50%
  EXPECT_EQ(low.Next(), absl::Milliseconds(50));
  ExponentialBackoff high(policy, [] { return 0.75; });  // +25%
  EXPECT_EQ(high.Next(), absl::Milliseconds(125));
}

}  // namespace
}  // namespace inac::southbound

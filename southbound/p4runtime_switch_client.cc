#include "southbound/p4runtime_switch_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "southbound/device_config.h"
#include "southbound/intent_reconciler.h"
#include "southbound/intent_translator.h"
#include "southbound/p4info_index.h"

namespace inac::southbound {
namespace {

uint64_t Fnv1a64(uint64_t seed, std::string_view bytes) {
  uint64_t hash = seed;
  for (char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

absl::StatusOr<std::unique_ptr<P4RuntimeSwitchClient>> P4RuntimeSwitchClient::Create(
    P4RuntimeSwitchClientOptions options) {
  absl::StatusOr<P4InfoIndex> p4info = options.p4info_text.empty()
                                           ? P4InfoIndex::EmbeddedIna()
                                           : P4InfoIndex::FromText(options.p4info_text);
  if (!p4info.ok()) return p4info.status();
  const uint64_t cookie =
      options.cookie.value_or(Fnv1a64(p4info->Fingerprint(), options.device_config));
  INAC_ASSIGN_OR_RETURN(IntentTranslator translator, IntentTranslator::Create(*std::move(p4info)));
  return std::unique_ptr<P4RuntimeSwitchClient>(new P4RuntimeSwitchClient(
      std::move(options), std::make_unique<IntentTranslator>(std::move(translator)), cookie));
}

P4RuntimeSwitchClient::P4RuntimeSwitchClient(P4RuntimeSwitchClientOptions options,
                                             std::unique_ptr<IntentTranslator> translator,
                                             uint64_t cookie)
    : options_(std::move(options)),
      translator_(std::move(translator)),
      cookie_(cookie),
      session_(std::make_unique<SwitchSession>(options_.session)),
      reconciler_(std::make_unique<IntentReconciler>(session_.get(), translator_.get())) {}

P4RuntimeSwitchClient::~P4RuntimeSwitchClient() { session_->Disconnect(); }

absl::Status P4RuntimeSwitchClient::Connect() { return session_->Connect(); }
bool P4RuntimeSwitchClient::IsConnected() const { return session_->IsConnected(); }
bool P4RuntimeSwitchClient::IsPrimary() const { return session_->IsPrimary(); }
void P4RuntimeSwitchClient::Disconnect() { session_->Disconnect(); }

absl::StatusOr<bool> P4RuntimeSwitchClient::EnsurePipeline() {
  absl::MutexLock lock(&mu_);
  if (pipeline_suspect_ && !repushed_) {
    // The cookie matched, yet the switch failed like a switch without a working pipeline (e.g.
    // a BMv2 given a P4Info without its JSON keeps the cookie but cannot read its tables).
    // Push once; a later successful Reconcile clears the suspicion.
    INAC_RETURN_IF_ERROR(
        session_->SetPipeline(translator_->p4info().p4info(), options_.device_config, cookie_));
    repushed_ = true;
    return true;
  }
  return session_->EnsurePipeline(translator_->p4info().p4info(), options_.device_config, cookie_);
}

absl::StatusOr<ReconcileStats> P4RuntimeSwitchClient::Reconcile(const core::SwitchIntent& intent) {
  absl::MutexLock lock(&mu_);
  // Reads need no session, and a switch that has not yet seen a closed stream end may still take
  // its writes: without a session of our own the run must not start (switch_client.h).
  if (!session_->IsConnected()) {
    return absl::UnavailableError(absl::StrCat("not connected to switch ", options_.switch_id));
  }
  absl::StatusOr<ReconcileStats> stats = reconciler_->Reconcile(intent);
  if (stats.ok()) {
    pipeline_suspect_ = false;
    repushed_ = false;
    return stats;
  }
  if (LooksPipelineless(stats.status()) && session_->IsConnected()) {
    if (repushed_) {
      return absl::Status(
          stats.status().code(),
          absl::StrCat(stats.status().message(),
                       " (the pipeline was pushed again and the switch still fails: is its "
                       "target kind right? it is \"",
                       options_.target_name, "\")"));
    }
    pipeline_suspect_ = true;
  }
  return stats;
}

bool P4RuntimeSwitchClient::LooksPipelineless(const absl::Status& status) {
  // Spec: FAILED_PRECONDITION without a pipeline. BMv2 (PI) holding a P4Info without a usable
  // device config: UNKNOWN "Error when reading table entries from target".
  return absl::IsFailedPrecondition(status) || absl::IsUnknown(status);
}

absl::StatusOr<std::vector<AggregationCounters>> P4RuntimeSwitchClient::ReadCounters(
    const core::SwitchIntent& intent) {
  absl::MutexLock lock(&mu_);
  std::vector<p4::v1::Entity> filters = translator_->CounterFilters(intent);
  if (filters.empty()) return std::vector<AggregationCounters>{};
  INAC_ASSIGN_OR_RETURN(auto read, session_->Read(filters));
  return translator_->DecodeCounters(intent, read);
}

absl::StatusOr<std::unique_ptr<SwitchClient>> CreateP4RuntimeClient(const core::Switch& sw,
                                                                    ElectionId election_id) {
  if (!sw.p4runtime.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("switch ", sw.id, " has no P4Runtime endpoint to connect to"));
  }
  P4RuntimeSwitchClientOptions options;
  options.switch_id = sw.id;
  options.session.address = sw.p4runtime->address;
  options.session.device_id = sw.p4runtime->device_id;
  options.session.election_id = election_id;
  options.session.connect_timeout = absl::Seconds(2);
  options.session.rpc_timeout = absl::Seconds(10);
  auto device_config = InaDeviceConfig(sw.p4runtime->target);
  if (!device_config.ok()) return device_config.status();
  options.device_config = *std::move(device_config);
  options.target_name = core::TargetKindName(sw.p4runtime->target);
  auto client = P4RuntimeSwitchClient::Create(std::move(options));
  if (!client.ok()) return client.status();
  return std::unique_ptr<SwitchClient>(std::move(*client));
}

}  // namespace inac::southbound

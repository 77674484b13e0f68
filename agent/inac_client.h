/* libinac_client: the C ABI a training framework links (or loads, as python/inac_torch does with
 * ctypes) to all-reduce its gradients through INAC: the job's switches and parameter servers,
 * by the data-plane contract the worker agent follows (docs/agents.md, docs/pytorch.md).
 *
 * Contract:
 *  - A session is one worker of one running job: inac_open reads the job's configuration (GET
 *    /api/v1/jobs/{job}/config, or a file), binds one UDP socket (bind:port, inside `netns` when
 *    given) and keeps it until inac_close. While it is open, a thread polls the configuration
 *    every refresh_ms and the next all-reduce follows a re-plan as `inac worker` does (the same
 *    PS and members for every chunk; anything else fails that all-reduce with
 *    INAC_FAILED_PRECONDITION).
 *  - All-reduces are numbered on the wire continuously over the session: all-reduce r of N lanes
 *    uses chunk numbers B_r + g for its gradient chunks g (agent/layout.h), B_{r+1} = B_r +
 *    ceil(N / 62); a float32 all-reduce first uses one chunk for its scale. Every member of the
 *    job must therefore make the same sequence of calls with the same sizes (DDP buckets are
 *    the same on every rank); the PS (`inac ps --serve`) needs no sizes.
 *  - inac_allreduce_i32 sums `buf` over the job's members in place, modulo 2^32 (the switch's
 *    and the PS's arithmetic). inac_allreduce_f32 sums float32 values as block floating point:
 *    the members first agree on the largest binary exponent of their buffers (a one-chunk int32
 *    all-reduce of one-hot exponent lanes: an exact MAX made of sums), then every value is
 *    round(x * 2^s) with the largest s in [0, 62] for which n members' sum cannot overflow int32,
 *    the int32 lanes are summed and divided by 2^s. Values that still do not fit (only +-inf,
 *    which votes exponent 31 and so forces s = 0, or values of 2^31 and more) are clamped to
 *    int32 and counted in `saturated` (NaN counts there and sums as 0); never silent. A sum over
 *    clamped lanes can wrap modulo 2^32: where any member reports saturated > 0, the affected
 *    lanes are not the float sum (a gradient with inf in it is one to skip anyway).
 *  - On failure the buffer holds partial results (some lanes summed, others not): a caller that
 *    falls back on another collective keeps its own copy. The chunk numbering still advances by
 *    the call's size, so the members stay in step for the next call.
 *  - Thread-safety: calls on one session are serialised (a mutex); sessions are independent.
 *    No call exits the process, raises a signal or writes to stdout/stderr.
 *  - Every call returns an inac_status; inac_last_error() is the message of the last failed
 *    call on the calling thread ("" after a success).
 *  - Limits: one session per member of a job at a time; a new session of the job opens no
 *    sooner than 1 s after the last all-reduce of the previous one (the PS tells a new session
 *    by its chunk numbers starting again, agent/ps_serve.h); 2^32 chunk numbers per session
 *    (~1 TiB of gradient; then reopen: the call fails with INAC_RESOURCE_EXHAUSTED); the worker
 *    must be a member of tags that together cover the whole gradient (INAC_FAILED_PRECONDITION
 *    otherwise).
 */
#ifndef INAC_CLIENT_H_
#define INAC_CLIENT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  INAC_OK = 0,
  INAC_INVALID_ARGUMENT = 1,    /* bad options or buffer; not a member of the job */
  INAC_NOT_FOUND = 2,           /* no such job, configuration file or network namespace */
  INAC_UNAVAILABLE = 3,         /* controller unreachable, socket cannot be bound */
  INAC_TIMEOUT = 4,             /* no new result for timeout_ms */
  INAC_FAILED_PRECONDITION = 5, /* job not running, a re-plan the session cannot follow */
  INAC_RESOURCE_EXHAUSTED = 6,  /* chunk numbers of the session used up */
  INAC_CANCELLED = 7,
  INAC_INTERNAL = 8
} inac_status;

/* How the all-reduce was carried. */
typedef enum {
  INAC_PATH_INA = 1, /* at least one of the worker's tags aggregates in a switch (with a grant) */
  INAC_PATH_PS = 2   /* straight to the PSs, no in-network aggregation */
} inac_path;

typedef struct {
  const char* server; /* controller URL; NULL or "": $INAC_SERVER, else http://127.0.0.1:8080 */
  const char* token;  /* bearer token; NULL: $INAC_TOKEN */
  const char* config_file; /* the JSON of GET /jobs/{id}/config; NULL: ask the server */
  const char* bind;        /* IPv4 address of the data-plane socket; NULL: 0.0.0.0 */
  int port;                /* UDP port; 0: 48864 (switches parse INA on 48864 alone) */
  const char* netns;       /* network namespace (/var/run/netns/NAME) of the socket; NULL: none */
  int timeout_ms;          /* fail an all-reduce after this long without a new result; 0: 30000 */
  int refresh_ms;          /* poll the configuration this often; 0: 500; < 0: never */
} inac_options;

typedef struct {
  int path;        /* inac_path */
  int scale_bits;  /* inac_allreduce_f32: the s used; -1 for int32 */
  int64_t lanes;   /* values all-reduced */
  int64_t packets; /* sent by this worker, retransmissions included */
  int64_t retransmissions;
  int64_t saturated;    /* inac_allreduce_f32: values clamped to int32 (or NaN) */
  int64_t plan_version; /* the plan the all-reduce finished under */
  double time_ms;
} inac_result;

typedef struct {
  int64_t allreduces; /* completed */
  int64_t failures;   /* all-reduces that returned an error */
  int64_t lanes;
  int64_t packets;
  int64_t retransmissions;
  int64_t saturated;
  int64_t plans;      /* plan versions run under */
  int64_t next_chunk; /* the chunk number the next all-reduce starts at */
  int64_t cpu_us;     /* CPU time of the session's data-plane work */
} inac_stats;

/* Fills `options` with the defaults (all NULL / 0). */
void inac_options_init(inac_options* options);

/* Opens a session of `worker` in job `job`. On success *out is the session (inac_close frees
 * it); on failure *out is NULL. */
inac_status inac_open(int64_t job, const char* worker, const inac_options* options,
                      struct inac_session** out);

inac_status inac_allreduce_i32(struct inac_session* session, int32_t* buf, int64_t n,
                               inac_result* result /* may be NULL */);
inac_status inac_allreduce_f32(struct inac_session* session, float* buf, int64_t n,
                               inac_result* result /* may be NULL */);

inac_status inac_get_stats(struct inac_session* session, inac_stats* stats);

/* Reports how this worker's all-reduces are carried to the controller (POST
 * /api/v1/jobs/{job}/data-path): `path` is "ina", "ps" or "fallback", `reason` why (may be NULL;
 * sent with control characters as spaces, cut to 256 bytes at a UTF-8 character boundary),
 * with the counts so far. A session opened from a configuration file reports only when a server
 * was given (options or $INAC_SERVER); otherwise INAC_FAILED_PRECONDITION. */
inac_status inac_report_data_path(struct inac_session* session, const char* path,
                                  const char* reason, int64_t allreduces, int64_t fallbacks);

/* Closes the socket, stops the configuration thread, frees the session. NULL is a no-op. */
void inac_close(struct inac_session* session);

/* The message of the last failed call on this thread. */
const char* inac_last_error(void);

/* "inac_client <version>". */
const char* inac_version(void);

#ifdef __cplusplus
}
#endif

#endif /* INAC_CLIENT_H_ */

// hoop_request_t: a non-blocking call of hoop_comm_t in flight (hoop::Request). The request
// only observes the call, which the communicator's thread runs whether or not anyone waits,
// so freeing one early cancels nothing.
#include "c_comm.h"

using hoop::Status;
using hoop::c_abi::check_not_null;
using hoop::c_abi::guard;

extern "C" {

hoop_status_t hoop_request_test(hoop_request_t* request, int* done) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(done, "done"));
    *done = 0;
    HOOP_RETURN_IF_ERROR(check_not_null(request, "request"));
    const hoop::Result<bool> finished = request->request.test();
    // A failed call has finished too: *done tells its error from a misuse of this function.
    *done = !finished.ok() || *finished ? 1 : 0;
    return finished.status();
  });
}

hoop_status_t hoop_request_wait(hoop_request_t* request) {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(request, "request"));
    return request->request.wait();
  });
}

// No guard: a request's destructor only drops a reference, which cannot throw.
void hoop_request_free(hoop_request_t* request) { delete request; }

}  // extern "C"

//===- QatcModule.cpp - the _qatc Python extension ------------------------===//
//
// Binds the runtime (Plan, Session) and runs qatc commands in-process
// (Driver.h), capturing what they print so that a failure becomes a
// qatc.Error carrying the command's located message. qatc/__init__.py is
// the API users see; this module is its engine.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"
#include "qatc/Runtime/Runtime.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <fcntl.h>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace py = pybind11;
using namespace qatc;

namespace {

/// Raised as qatc.Error.
struct QatcError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Replaces file descriptor `fd` with a pipe while alive; a thread collects
/// what is written to it and, with `echo`, passes it on to what `fd` was.
class FdTee {
public:
  FdTee(int fd, bool echo) : fd_(fd) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
      throw QatcError("cannot capture the command's output: pipe failed");
    saved_ = dup(fd);
    dup2(p[1], fd);
    close(p[1]);
    int readEnd = p[0], to = echo ? saved_ : -1;
    reader_ = std::thread([this, readEnd, to] {
      char buf[4096];
      ssize_t n;
      while ((n = read(readEnd, buf, sizeof buf)) > 0) {
        text_.append(buf, static_cast<size_t>(n));
        if (to >= 0 && write(to, buf, static_cast<size_t>(n)) < 0) {
          // The caller's stream is gone; keep collecting.
        }
      }
      close(readEnd);
    });
  }
  /// Restores the descriptor and returns everything written to it.
  std::string finish() {
    dup2(saved_, fd_); // closes the pipe's last write end: the reader ends
    close(saved_);
    reader_.join();
    return std::move(text_);
  }

private:
  int fd_, saved_;
  std::thread reader_;
  std::string text_;
};

/// Commands share the command-line parser's global state: one at a time.
std::mutex commandMutex;

/// Runs a qatc command line; returns (exit code, stdout, stderr). stderr is
/// passed on live (progress lines); stdout too unless captured for a result.
py::tuple runCommand(const std::vector<std::string> &args, bool echoStdout) {
  int rc;
  std::string out, err, usage;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(commandMutex);
    std::fflush(stdout);
    std::fflush(stderr);
    FdTee teeOut(1, echoStdout), teeErr(2, true);
    rc = driver::runCommandLine(args, usage);
    std::fflush(stdout);
    std::fflush(stderr);
    out = teeOut.finish();
    err = teeErr.finish();
  }
  return py::make_tuple(rc, py::bytes(out), py::bytes(err + usage));
}

py::list ioList(const rt::Plan &p, bool outputs) {
  const plan::Manifest &m = p.manifest();
  py::list l;
  for (int i : outputs ? m.outputs : m.inputs) {
    const plan::TensorDesc &t = m.tensors[i];
    l.append(py::make_tuple(t.name, py::tuple(py::cast(t.shape)),
                            driver::numpyTypeName(t)));
  }
  return l;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

/// A session on a plan it keeps alive; runs are serialized per session.
class PySession {
public:
  PySession(std::shared_ptr<rt::Plan> plan, int threads, bool profile)
      : plan_(std::move(plan)) {
    if (threads < 1)
      throw QatcError("threads must be at least 1, not " +
                      std::to_string(threads));
    session_ = std::make_unique<rt::Session>(*plan_, threads);
    session_->setProfiling(profile);
    profiling_ = profile;
  }

  py::dict run(const py::dict &inputs) {
    const plan::Manifest &m = plan_->manifest();
    std::string names;
    for (int i : m.inputs)
      names += (names.empty() ? "" : ", ") + m.tensors[i].name;
    for (auto item : inputs) {
      std::string key = py::str(item.first);
      bool known = false;
      for (int i : m.inputs)
        known |= m.tensors[i].name == key;
      if (!known)
        throw QatcError("the plan has no input '" + key +
                        "' (its inputs: " + names + ")");
    }
    std::vector<py::array> held;
    std::vector<const void *> in;
    for (int i : m.inputs) {
      const plan::TensorDesc &t = m.tensors[i];
      if (!inputs.contains(t.name))
        throw QatcError("missing input '" + t.name +
                        "' (the plan's inputs: " + names + ")");
      py::object value = inputs[py::str(t.name)];
      py::array a = py::array::ensure(value);
      if (!a)
        throw QatcError("input '" + t.name + "' is not an array");
      py::dtype want = py::dtype(driver::numpyTypeName(t));
      if (!a.dtype().is(want) && !a.dtype().equal(want))
        throw QatcError("input '" + t.name + "' is " +
                        std::string(py::str(a.dtype())) + ", the plan takes " +
                        driver::numpyTypeName(t));
      std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
      if (shape != t.shape)
        throw QatcError("input '" + t.name + "' has shape " +
                        shapeString(shape) + ", the plan takes " +
                        shapeString(t.shape));
      // Used in place when C-contiguous; otherwise a contiguous copy.
      py::array c = py::array::ensure(a, py::array::c_style);
      held.push_back(c);
      in.push_back(c.data());
    }
    py::dict result;
    std::vector<py::array> outs;
    std::vector<void *> out;
    for (int i : m.outputs) {
      const plan::TensorDesc &t = m.tensors[i];
      py::array a(py::dtype(driver::numpyTypeName(t)),
                  std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
      out.push_back(a.mutable_data());
      outs.push_back(a);
      result[py::str(t.name)] = a;
    }
    std::string error;
    bool ok;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
      if (!lock.owns_lock()) {
        error = "this session is running in another thread: give each "
                "thread its own session (plan.session())";
        ok = false;
      } else {
        ok = session_->run(in, out, error);
        if (ok)
          ++runs_;
      }
    }
    if (!ok)
      throw QatcError(error);
    return result;
  }

  py::list profile() {
    if (!profiling_)
      throw QatcError("the session does not profile: create it with "
                      "plan.session(profile=True)");
    std::lock_guard<std::mutex> lock(mutex_);
    const plan::Manifest &m = plan_->manifest();
    const std::vector<double> &seconds = session_->layerSeconds();
    py::list l;
    for (size_t i = 0; i < m.layers.size() && i < seconds.size(); ++i) {
      const plan::LayerDesc &d = m.layers[i];
      py::dict e;
      e["layer"] = i;
      e["node"] = d.node;
      e["op"] = d.opType;
      e["precision"] = d.precision;
      e["kernel"] = d.kernel;
      e["macs"] = d.macs;
      e["ms"] = runs_ ? seconds[i] / runs_ * 1e3 : 0.0;
      l.append(e);
    }
    return l;
  }

  void resetProfile() {
    std::lock_guard<std::mutex> lock(mutex_);
    session_->resetProfile();
    runs_ = 0;
  }

  int threads() const { return session_->threads(); }
  int64_t runs() const { return runs_; }

private:
  std::shared_ptr<rt::Plan> plan_;
  std::unique_ptr<rt::Session> session_;
  std::mutex mutex_;
  bool profiling_ = false;
  int64_t runs_ = 0;
};

std::shared_ptr<rt::Plan> loadPlan(const std::string &path,
                                   const std::string &isa) {
  std::string error;
  rt::Plan::LoadOptions options;
  options.isa = isa;
  std::unique_ptr<rt::Plan> p;
  {
    py::gil_scoped_release release;
    p = rt::Plan::load(path, error, options);
  }
  if (!p)
    throw QatcError(error);
  return std::shared_ptr<rt::Plan>(std::move(p));
}

} // namespace

PYBIND11_MODULE(_qatc, m) {
  m.doc() = "qatc's engine: the plan runtime and the qatc commands "
            "in-process (use the qatc package)";
  py::register_exception<QatcError>(m, "Error", PyExc_RuntimeError);

  m.def("run_command", &runCommand, py::arg("args"),
        py::arg("echo_stdout") = true,
        "Runs a qatc command line in this process: (exit code, stdout, "
        "stderr) as bytes.");

  py::class_<rt::Plan, std::shared_ptr<rt::Plan>>(m, "Plan")
      .def(py::init(&loadPlan), py::arg("path"), py::arg("isa") = "")
      .def_property_readonly("inputs",
                             [](const rt::Plan &p) { return ioList(p, false); })
      .def_property_readonly("outputs",
                             [](const rt::Plan &p) { return ioList(p, true); })
      .def_property_readonly(
          "target", [](const rt::Plan &p) { return p.manifest().target; })
      .def_property_readonly("paths",
                             [](const rt::Plan &p) {
                               py::list l;
                               for (const plan::PathDesc &d : p.paths())
                                 l.append(d.target);
                               return l;
                             })
      .def_property_readonly("file_bytes", &rt::Plan::fileBytes);

  py::class_<PySession>(m, "Session")
      .def(py::init<std::shared_ptr<rt::Plan>, int, bool>(), py::arg("plan"),
           py::arg("threads") = 1, py::arg("profile") = false)
      .def("run", &PySession::run, py::arg("inputs"))
      .def("profile", &PySession::profile)
      .def("reset_profile", &PySession::resetProfile)
      .def_property_readonly("threads", &PySession::threads)
      .def_property_readonly("runs", &PySession::runs);
}

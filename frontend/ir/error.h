/// \file Errors kiln reports to users, and the one kind it must never report as theirs.
#pragma once
#include <stdexcept>
#include <string>

namespace kiln {

/// A user-facing error: bad input, an inconsistent graph, an op used wrongly. The message is one line
/// that names the file, node or field at fault. The driver prints it and exits with code 2.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The model is well formed but uses something kiln does not claim to support (an op, a dtype, an
/// opset). Conformance counts these apart from failures.
class Unsupported : public Error {
 public:
  using Error::Error;
};

/// Shape inference needs the value of `value_name` (e.g. a Reshape target that is a graph input). A
/// caller that knows that value (conformance test data, a user's --freeze) can fix it and retry.
class NotConstant : public Error {
 public:
  NotConstant(const std::string& msg, std::string value_name) : Error(msg), value_name_(std::move(value_name)) {}
  const std::string& value_name() const { return value_name_; }

 private:
  std::string value_name_;
};

/// A broken invariant inside kiln: a bug, never the user's input. It does not derive from Error so that
/// no handler of user errors swallows it, and the driver reports it as an internal error (exit code 3)
/// instead of blaming the model.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace kiln

#include "testing/piece_streams.h"

namespace qd::testing {

namespace {
class PieceStream : public TokenStream {
 public:
  explicit PieceStream(const std::vector<std::string>* pieces) : pieces_(pieces) {}
  std::string push(int32_t id) override {
    return id >= 0 && (size_t)id < pieces_->size() ? (*pieces_)[id] : std::string();
  }
  std::string flush() override { return {}; }

 private:
  const std::vector<std::string>* pieces_;
};
}  // namespace

std::unique_ptr<TokenStream> PieceStreams::open(const std::vector<int32_t>&) const {
  return std::make_unique<PieceStream>(&pieces_);
}

}  // namespace qd::testing

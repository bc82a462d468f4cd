function check(user) {
  return user.startsWith("a");
}

function login(user, password) {
  return check(user) && password.length > 3;
}

module.exports = { login };
